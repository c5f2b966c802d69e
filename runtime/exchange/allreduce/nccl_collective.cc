#include "runtime/exchange/allreduce/nccl_collective.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/exchange/nccl_status.h"

namespace kubetrain::allreduce {

using exchange::CudaStatus;
using exchange::NcclStatus;

struct NcclCollective::Impl {
  // Not guarded: set by Create before the collective is shared, then only
  // read (the CUDA calls on them are thread-safe).
  int device = 0;
  cudaStream_t compute = nullptr;  // the device's; borrowed
  cudaStream_t stream = nullptr;   // the collectives'
  cudaEvent_t fork = nullptr;      // compute's work so far, before a collective
  cudaEvent_t joins[kWaitableJoins] = {};
  int64_t joined ABSL_GUARDED_BY(mu) = 0;  // joins recorded
  // Guards comm: calls (which return at once on a non-blocking
  // communicator) and ncclCommAbort (Shutdown, any thread) never overlap.
  absl::Mutex mu;
  ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
  std::atomic<bool> aborted{false};  // atomic: polled without the lock
  bool finalized = false;
};

namespace {

// Polls back off from 20 us to 1 ms.
class Backoff {
 public:
  void Wait() {
    std::this_thread::sleep_for(wait_);
    wait_ = std::min(wait_ * 2, std::chrono::microseconds(1000));
  }

 private:
  std::chrono::microseconds wait_{20};
};

}  // namespace

absl::StatusOr<std::string> NcclCollective::NewUniqueId() {
  ncclUniqueId id;
  if (absl::Status s = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s.ok()) return s;
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Create(
    int rank, int world, const std::string& unique_id, ComputeDevice& device,
    const exchange::IoCheck& check) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id has ", unique_id.size(),
                                                   " bytes, expected ", sizeof(id.internal)));
  }
  if (device.host_memory() || device.native_queue() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL needs a GPU; ", device.info().Id(), " is not one"));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  auto impl = std::make_unique<Impl>();
  impl->device = device.info().index;
  impl->compute = static_cast<cudaStream_t>(device.native_queue());
  // Every handle is kept as soon as it exists, so ~NcclCollective frees
  // whatever a failure part-way through left.
  std::unique_ptr<NcclCollective> c(new NcclCollective(std::move(impl)));
  Impl& m = *c->impl_;
  if (absl::Status s = CudaStatus(cudaSetDevice(m.device), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s =
          CudaStatus(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "NCCL stream");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CudaStatus(cudaEventCreateWithFlags(&m.fork, cudaEventDisableTiming), "NCCL event");
      !s.ok()) {
    return s;
  }
  for (cudaEvent_t& e : m.joins) {
    if (absl::Status s =
            CudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "NCCL event");
        !s.ok()) {
      return s;
    }
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t started;
  {
    absl::MutexLock l(&m.mu);
    started = ncclCommInitRankConfig(&m.comm, world, id, rank, &config);
    if (started != ncclSuccess && started != ncclInProgress) m.comm = nullptr;
  }
  const std::string what =
      absl::StrCat("ncclCommInitRank (rank ", rank, " of ", world, " on cuda:", m.device, ")");
  if (absl::Status s = c->Settle(started, what.c_str(), check); !s.ok()) return s;
  return c;
}

NcclCollective::NcclCollective(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclCollective::~NcclCollective() {
  Impl& m = *impl_;
  cudaSetDevice(m.device);
  {
    absl::MutexLock l(&m.mu);
    if (m.comm != nullptr && !m.aborted) {
      // A clean end: let queued work finish, then finalize (non-blocking:
      // polled, for at most 10 s) and destroy.
      if (m.stream != nullptr) cudaStreamSynchronize(m.stream);
      ncclResult_t state = ncclCommFinalize(m.comm);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      Backoff backoff;
      while (state == ncclInProgress && std::chrono::steady_clock::now() < until) {
        backoff.Wait();
        ncclCommGetAsyncError(m.comm, &state);
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(m.comm);
      } else {
        ncclCommAbort(m.comm);
      }
      m.comm = nullptr;
    } else if (m.comm != nullptr) {
      ncclCommAbort(m.comm);
      m.comm = nullptr;
    }
  }
  for (cudaEvent_t e : m.joins) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (m.fork != nullptr) cudaEventDestroy(m.fork);
  if (m.stream != nullptr) cudaStreamDestroy(m.stream);
}

void NcclCollective::Shutdown() {
  Impl& m = *impl_;
  absl::MutexLock l(&m.mu);
  if (m.aborted.exchange(true) || m.comm == nullptr) return;
  // Ends kernels waiting on a lost peer, so the device's stream (and any
  // host wait on it) moves on, with an error. Allowed while another thread
  // polls a pending call: the communicator is non-blocking.
  cudaSetDevice(m.device);
  ncclCommAbort(m.comm);
  m.comm = nullptr;
}

absl::Status NcclCollective::Settle(ncclResult_t started, const char* what,
                                    const exchange::IoCheck& check) {
  Impl& m = *impl_;
  ncclResult_t state = started;
  Backoff backoff;
  while (state == ncclInProgress) {
    if (check) {
      if (absl::Status s = check(); !s.ok()) {
        Shutdown();
        return s;
      }
    }
    backoff.Wait();
    absl::MutexLock l(&m.mu);
    if (m.aborted || m.comm == nullptr) {
      return absl::AbortedError("the NCCL communicator was shut down");
    }
    ncclCommGetAsyncError(m.comm, &state);
  }
  if (state == ncclSuccess) return absl::OkStatus();
  absl::Status s = NcclStatus(state, what);
  Shutdown();
  return s;
}

absl::Status NcclCollective::Fork() {
  Impl& m = *impl_;
  if (absl::Status s = CudaStatus(cudaSetDevice(m.device), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaEventRecord(m.fork, m.compute), "NCCL fork"); !s.ok()) {
    return s;
  }
  return CudaStatus(cudaStreamWaitEvent(m.stream, m.fork, 0), "NCCL fork");
}

absl::Status NcclCollective::AllreduceSum(const float* in, float* out, int64_t n,
                                          const exchange::IoCheck& check) {
  if (n <= 0) return absl::OkStatus();
  Impl& m = *impl_;
  ncclResult_t started;
  {
    absl::MutexLock l(&m.mu);
    if (m.aborted || m.comm == nullptr) {
      return absl::AbortedError("the NCCL communicator was shut down");
    }
    if (absl::Status s = Fork(); !s.ok()) return s;
    started = ncclAllReduce(in, out, static_cast<size_t>(n), ncclFloat, ncclSum, m.comm, m.stream);
  }
  if (absl::Status s = Settle(started, "ncclAllReduce", check); !s.ok()) return s;
  bytes_ += n * static_cast<int64_t>(sizeof(float));
  return absl::OkStatus();
}

absl::Status NcclCollective::Broadcast(float* data, int64_t n, int root,
                                       const exchange::IoCheck& check) {
  if (n <= 0) return absl::OkStatus();
  Impl& m = *impl_;
  ncclResult_t started;
  {
    absl::MutexLock l(&m.mu);
    if (m.aborted || m.comm == nullptr) {
      return absl::AbortedError("the NCCL communicator was shut down");
    }
    if (absl::Status s = Fork(); !s.ok()) return s;
    started = ncclBroadcast(data, data, static_cast<size_t>(n), ncclFloat, root, m.comm, m.stream);
  }
  if (absl::Status s = Settle(started, "ncclBroadcast", check); !s.ok()) return s;
  bytes_ += n * static_cast<int64_t>(sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NcclCollective::Join() {
  Impl& m = *impl_;
  absl::MutexLock l(&m.mu);
  if (m.aborted) return absl::AbortedError("the NCCL communicator was shut down");
  cudaEvent_t e = m.joins[m.joined % kWaitableJoins];
  if (absl::Status s = CudaStatus(cudaSetDevice(m.device), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaEventRecord(e, m.stream), "NCCL join"); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaStreamWaitEvent(m.compute, e, 0), "NCCL join"); !s.ok()) {
    return s;
  }
  return ++m.joined;
}

absl::Status NcclCollective::WaitJoined(int64_t join, const exchange::IoCheck& check) {
  Impl& m = *impl_;
  if (join <= 0) return absl::OkStatus();
  cudaEvent_t e;
  {
    absl::MutexLock l(&m.mu);
    if (join > m.joined || join <= m.joined - kWaitableJoins) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL join ", join, " cannot be waited for (", m.joined, " recorded)"));
    }
    e = m.joins[(join - 1) % kWaitableJoins];
  }
  cudaSetDevice(m.device);  // this thread may not have used the GPU yet
  // Poll instead of blocking, so that a lost peer (the caller's check, or
  // the communicator's own error) aborts the communicator rather than hang.
  Backoff backoff;
  while (true) {
    const cudaError_t q = cudaEventQuery(e);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) return CudaStatus(q, "NCCL collectives");
    // Not an error: clear it, or this thread's next kernel launch (whose
    // check reads the last error) would report it.
    (void)cudaGetLastError();
    if (m.aborted) return absl::AbortedError("the NCCL communicator was shut down");
    ncclResult_t async_error = ncclSuccess;
    {
      absl::MutexLock l(&m.mu);
      if (m.comm != nullptr) ncclCommGetAsyncError(m.comm, &async_error);
    }
    if (async_error != ncclSuccess && async_error != ncclInProgress) {
      absl::Status s = NcclStatus(async_error, "NCCL");
      Shutdown();
      return s;
    }
    if (check) {
      if (absl::Status s = check(); !s.ok()) {
        Shutdown();
        return s;
      }
    }
    backoff.Wait();
  }
}

}  // namespace kubetrain::allreduce
