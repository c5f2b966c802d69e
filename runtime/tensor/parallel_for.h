// ParallelFor: the CPU backend's thread pool for element loops and split
// GEMMs. [0, n) is cut into ParallelChunks(n, grain) contiguous chunks that
// depend only on n, grain and the thread count, never on timing, so a loop
// that reduces per-chunk partials in chunk order gives the same bits on
// every run with the same thread count.
//
// The pool has ComputeThreads() threads (the caller counts as one), set with
// SetBlasThreads() together with OpenBLAS's (runtime/tensor/blas.h). While a
// region with more than one chunk runs, OpenBLAS is held to one thread so
// that GEMMs called from chunks do not oversubscribe the CPUs.
//
// Thread-safe: one region runs on the pool at a time; a region started while
// another runs (or from inside a chunk) runs its chunks in order on the
// calling thread, with the same chunking.
#ifndef KUBETRAIN_RUNTIME_TENSOR_PARALLEL_FOR_H_
#define KUBETRAIN_RUNTIME_TENSOR_PARALLEL_FOR_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace kubetrain {

// Sets the pool's thread count (>= 1); joins the old workers. Called by
// SetBlasThreads; not while a region runs.
void SetComputeThreads(int n);
// The pool's thread count; before any SetComputeThreads, OpenBLAS's.
int ComputeThreads();

// Number of chunks ParallelFor(n, grain, ...) uses: min(4 * threads,
// ceil(n / grain)), at least 1 (0 when n <= 0). Threads take chunks as they
// become free, so a thread slowed by another process takes fewer.
int ParallelChunks(int64_t n, int64_t grain);

// Runs fn(chunk, begin, end) over the chunks of [0, n); chunk c covers
// [c * n / chunks, (c + 1) * n / chunks). Returns when all have run.
void ParallelFor(int64_t n, int64_t grain,
                 absl::FunctionRef<void(int chunk, int64_t begin, int64_t end)> fn);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_PARALLEL_FOR_H_
