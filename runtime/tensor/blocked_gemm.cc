#include "runtime/tensor/blocked_gemm.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "runtime/tensor/parallel_for.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KT_BLOCKED_GEMM_X86 1
#define KT_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define KT_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace kubetrain {
namespace {

// k-block depth: a packed B panel (kKc x 32 floats, 32 KiB) stays in L1
// while all the task's rows of A stream past it.
constexpr int64_t kKc = 256;
// Rows of C per task at most (larger m is cut into equal row blocks, so
// big batches still give every thread work when n is narrow).
constexpr int64_t kMaxRowsPerTask = 512;
constexpr int kMaxMr = 12;
constexpr int kMaxNr = 32;

// One output tile's store: how the sum of this k-block joins what C holds.
struct Tile {
  float* c;
  int64_t ldc;
  int mr, nr;         // valid rows and columns (<= the kernel's)
  float alpha;        // c = alpha * sum (+ beta * c when load_c)
  float beta;         // the caller's beta for the first k-block, then 1
  bool load_c;        // false only for the first k-block with beta == 0
  const float* bias;  // the tile's column biases on the last k-block, else null
  bool relu;          // on the last k-block
};

#ifdef KT_BLOCKED_GEMM_X86

// dst[8 x ldd] = transpose of src[8 x lds] (8 x 8 floats).
KT_AVX2 inline void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
               r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
               r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
               r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
               s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
               s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
               s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)),
               s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
               s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2)),
               s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
               s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// Copies op(B)[p0, p0 + kc) x [j0, j0 + nr) into dst as kc rows of `width`
// floats, columns nr.. zeroed.
KT_AVX2 void PackB(const GemmProblem& pr, int64_t p0, int64_t kc, int64_t j0, int nr, int width,
                   float* dst) {
  if (pr.trans_b == Trans::kNo) {  // op(B)(p, j) = b[p * ldb + j]: rows are contiguous
    for (int64_t p = 0; p < kc; ++p) {
      float* row = dst + p * width;
      std::memcpy(row, pr.b + (p0 + p) * pr.ldb + j0, static_cast<size_t>(nr) * sizeof(float));
      std::fill(row + nr, row + width, 0.0f);
    }
    return;
  }
  // op(B)(p, j) = b[j * ldb + p]: transpose, 8 x 8 at a time.
  const float* b = pr.b + j0 * pr.ldb + p0;
  const int nr8 = nr / 8 * 8;
  const int64_t kc8 = kc / 8 * 8;
  for (int j = 0; j < nr8; j += 8) {
    for (int64_t p = 0; p < kc8; p += 8)
      Transpose8x8(b + j * pr.ldb + p, pr.ldb, dst + p * width + j, width);
    for (int64_t p = kc8; p < kc; ++p) {
      for (int jj = j; jj < j + 8; ++jj) dst[p * width + jj] = b[jj * pr.ldb + p];
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    float* row = dst + p * width;
    for (int j = nr8; j < nr; ++j) row[j] = b[j * pr.ldb + p];
    std::fill(row + nr, row + width, 0.0f);
  }
}

// Copies op(A)[i0, i0 + mr) x [p0, p0 + kc) into dst as kc rows of `height`
// floats (op(A) transposed, rows mr.. zeroed): the layout the kernels read
// with trans_a, for the last partial block of rows.
void PackAEdge(const GemmProblem& pr, int64_t i0, int mr, int64_t p0, int64_t kc, int height,
               float* dst) {
  for (int64_t p = 0; p < kc; ++p) {
    float* row = dst + p * height;
    for (int i = 0; i < mr; ++i) {
      row[i] = pr.trans_a == Trans::kNo ? pr.a[(i0 + i) * pr.lda + p0 + p]
                                        : pr.a[(p0 + p) * pr.lda + i0 + i];
    }
    std::fill(row + mr, row + height, 0.0f);
  }
}

// AVX-512: a 12 x 32 tile of C in 24 registers. With kTransA, op(A)(i, p)
// = a[p * lda + i], else a[i * lda + p]; bp is the packed panel (kc x 32).
template <bool kTransA>
KT_AVX512 void Kernel12x32(int64_t kc, const float* a, int64_t lda, const float* bp,
                           const Tile& t) {
  __m512 c0[12], c1[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(bp + p * 32);
    const __m512 b1 = _mm512_load_ps(bp + p * 32 + 16);
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      const __m512 ai = _mm512_set1_ps(kTransA ? a[p * lda + i] : a[i * lda + p]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
  }
  const __mmask16 m0 = t.nr >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << t.nr) - 1);
  const __mmask16 m1 = t.nr <= 16   ? 0
                       : t.nr >= 32 ? 0xFFFF
                                    : static_cast<__mmask16>((1u << (t.nr - 16)) - 1);
  const __m512 alpha = _mm512_set1_ps(t.alpha), beta = _mm512_set1_ps(t.beta);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 bias0 = t.bias != nullptr ? _mm512_maskz_loadu_ps(m0, t.bias) : zero;
  const __m512 bias1 = t.bias != nullptr ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : zero;
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) {
    if (i >= t.mr) break;
    float* row = t.c + i * t.ldc;
    __m512 v0 = _mm512_mul_ps(alpha, c0[i]);
    __m512 v1 = _mm512_mul_ps(alpha, c1[i]);
    if (t.load_c) {
      v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    v0 = _mm512_add_ps(v0, bias0);
    v1 = _mm512_add_ps(v1, bias1);
    if (t.relu) {  // (the masked form: GCC 12 warns about _mm512_max_ps's undefined source)
      v0 = _mm512_mask_max_ps(v0, 0xFFFF, v0, zero);
      v1 = _mm512_mask_max_ps(v1, 0xFFFF, v1, zero);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// AVX2: a 6 x 16 tile of C in 12 registers; as Kernel12x32 otherwise.
template <bool kTransA>
KT_AVX2 void Kernel6x16(int64_t kc, const float* a, int64_t lda, const float* bp, const Tile& t) {
  __m256 c0[6], c1[6];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    c0[i] = _mm256_setzero_ps();
    c1[i] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(bp + p * 16);
    const __m256 b1 = _mm256_load_ps(bp + p * 16 + 8);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      const __m256 ai = _mm256_set1_ps(kTransA ? a[p * lda + i] : a[i * lda + p]);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
  }
  alignas(32) float sums[6][16];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    _mm256_store_ps(sums[i], c0[i]);
    _mm256_store_ps(sums[i] + 8, c1[i]);
  }
  for (int i = 0; i < t.mr; ++i) {
    float* row = t.c + i * t.ldc;
    for (int j = 0; j < t.nr; ++j) {
      float v = t.alpha * sums[i][j];
      if (t.load_c) v += t.beta * row[j];
      if (t.bias != nullptr) v += t.bias[j];
      if (t.relu) v = std::max(v, 0.0f);
      row[j] = v;
    }
  }
}

#endif  // KT_BLOCKED_GEMM_X86

using KernelFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* bp, const Tile& t);

struct Isa {
  int mr, nr;
  KernelFn kernel_n, kernel_t;  // op(A) row-major, transposed
};

bool Detect(GemmKernel kernel, Isa* isa) {
#ifdef KT_BLOCKED_GEMM_X86
  __builtin_cpu_init();
  if (kernel == GemmKernel::kBest && __builtin_cpu_supports("avx512f")) {
    *isa = {12, 32, &Kernel12x32<false>, &Kernel12x32<true>};
    return true;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *isa = {6, 16, &Kernel6x16<false>, &Kernel6x16<true>};
    return true;
  }
#endif
  (void)kernel, (void)isa;
  return false;
}

// Row blocks of a problem: count and rows per block (a multiple of mr).
struct RowBlocks {
  int64_t count, rows;
};

RowBlocks SplitRows(int64_t m, int mr) {
  const int64_t count = (m + kMaxRowsPerTask - 1) / kMaxRowsPerTask;
  const int64_t per = (m + count - 1) / count;
  return {count, (per + mr - 1) / mr * mr};
}

int64_t Panels(const GemmProblem& pr, const Isa& isa) { return (pr.n + isa.nr - 1) / isa.nr; }

// C rows [i0, i1) x the NR-column panel at j0 of one problem.
void RunTask(const GemmProblem& pr, const Isa& isa, int64_t i0, int64_t i1, int64_t j0) {
#ifdef KT_BLOCKED_GEMM_X86
  alignas(64) float bpack[kKc * kMaxNr];
  alignas(64) float apack[kKc * kMaxMr];
  const int nr = static_cast<int>(std::min<int64_t>(isa.nr, pr.n - j0));
  const GemmEpilogue& e = pr.epilogue;
  int64_t p0 = 0;
  do {
    const int64_t kc = std::min(kKc, pr.k - p0);
    const bool first = p0 == 0, last = p0 + kc >= pr.k;
    if (kc > 0) PackB(pr, p0, kc, j0, nr, isa.nr, bpack);
    Tile t{.c = nullptr,
           .ldc = pr.ldc,
           .mr = 0,
           .nr = nr,
           .alpha = e.alpha,
           .beta = first ? e.beta : 1.0f,
           .load_c = !first || e.beta != 0.0f,
           .bias = last && e.column_bias != nullptr ? e.column_bias + j0 : nullptr,
           .relu = last && e.relu};
    for (int64_t i = i0; i < i1; i += isa.mr) {
      t.mr = static_cast<int>(std::min<int64_t>(isa.mr, i1 - i));
      t.c = pr.c + i * pr.ldc + j0;
      if (t.mr == isa.mr) {
        if (pr.trans_a == Trans::kNo) {
          isa.kernel_n(kc, pr.a + i * pr.lda + p0, pr.lda, bpack, t);
        } else {
          isa.kernel_t(kc, pr.a + p0 * pr.lda + i, pr.lda, bpack, t);
        }
      } else {
        PackAEdge(pr, i, t.mr, p0, kc, isa.mr, apack);
        isa.kernel_t(kc, apack, isa.mr, bpack, t);
      }
    }
    p0 += kc;
  } while (p0 < pr.k);
#else
  (void)pr, (void)isa, (void)i0, (void)i1, (void)j0;
#endif
}

}  // namespace

bool BlockedGemmAvailable(GemmKernel kernel) {
  Isa isa;
  return Detect(kernel, &isa);
}

const char* BlockedGemmKernel() {
  Isa isa;
  if (!Detect(GemmKernel::kBest, &isa)) return "none";
  return isa.nr == 32 ? "avx512" : "avx2";
}

void BlockedGemm(std::span<const GemmProblem> problems, GemmKernel kernel) {
  Isa isa;
  KT_CHECK(Detect(kernel, &isa)) << "BlockedGemm needs AVX-512F or AVX2 with FMA";
  int64_t tasks = 0;
  for (const GemmProblem& pr : problems) {
    KT_CHECK(pr.m > 0 && pr.n > 0 && pr.k >= 0);
    tasks += SplitRows(pr.m, isa.mr).count * Panels(pr, isa);
  }
  ParallelFor(tasks, 1, [&](int, int64_t begin, int64_t end) {
    size_t q = 0;
    int64_t first_task = 0;  // of problems[q]
    for (int64_t task = begin; task < end; ++task) {
      for (;;) {
        const GemmProblem& pr = problems[q];
        const int64_t count = SplitRows(pr.m, isa.mr).count * Panels(pr, isa);
        if (task < first_task + count) break;
        first_task += count;
        ++q;
      }
      const GemmProblem& pr = problems[q];
      const RowBlocks rb = SplitRows(pr.m, isa.mr);
      const int64_t local = task - first_task, panels = Panels(pr, isa);
      const int64_t i0 = local / panels * rb.rows;
      if (i0 >= pr.m) continue;
      RunTask(pr, isa, i0, std::min(pr.m, i0 + rb.rows), local % panels * isa.nr);
    }
  });
}

}  // namespace kubetrain
