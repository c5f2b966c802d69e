#include "runtime/tensor/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/blocked_gemm.h"
#include "runtime/tensor/kernels/cpu_clones.h"
#include "runtime/tensor/kernels/relu.h"
#include "runtime/tensor/kernels/rows.h"
#include "runtime/tensor/kernels/softmax_cross_entropy.h"
#include "runtime/tensor/parallel_for.h"
#include "runtime/tensor/parallel_gemm.h"

namespace kubetrain {
namespace {

// Elements per ParallelFor chunk at least: below this a second thread costs
// more than it saves.
constexpr int64_t kElementGrain = 1 << 15;
constexpr size_t kAlignment = 64;

void FreeHost(void* p) { std::free(p); }

// CPU launch wrappers: the kernels vectorised for the CPU's best ISA.
KT_CPU_CLONES void MaxPoolForwardImages(const kernels::MaxPoolGeometry& g, int64_t begin,
                                        int64_t end, const float* x, float* y, int32_t* argmax) {
  kernels::MaxPoolForward(g, begin, end, x, y, argmax);
}

KT_CPU_CLONES void MaxPoolBackwardImages(const kernels::MaxPoolGeometry& g, int64_t begin,
                                         int64_t end, const float* gy, const int32_t* argmax,
                                         float* gx) {
  kernels::MaxPoolBackward(g, begin, end, gy, argmax, gx);
}

KT_CPU_CLONES void SgdRange(const kernels::SgdParams& o, int64_t begin, int64_t end, float* p,
                            const float* g, float* v) {
  kernels::SgdUpdate(o, begin, end, p, g, v);
}

KT_CPU_CLONES void AdamRange(const kernels::AdamParams& o, int64_t begin, int64_t end, float* p,
                             const float* g, float* m, float* v) {
  kernels::AdamUpdate(o, begin, end, p, g, m, v);
}

// Columns [begin, end) of gy{rows, cols}: db[j] = sum over rows of g, in
// row order, where g = gy, or with y (the ReLU's output) non-null g = gy
// where y > 0 else 0, also written to masked.
KT_CPU_CLONES void MaskAndSumColumns(const float* y, const float* gy, int64_t rows, int64_t cols,
                                     int64_t begin, int64_t end, float* masked, float* db) {
  std::fill(db + begin, db + end, 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t o = i * cols;
    if (y != nullptr) {
      for (int64_t j = begin; j < end; ++j) {
        const float g = y[o + j] > 0.0f ? gy[o + j] : 0.0f;
        masked[o + j] = g;
        db[j] += g;
      }
    } else {
      for (int64_t j = begin; j < end; ++j) db[j] += gy[o + j];
    }
  }
}

// Columns per chunk at least for MaskAndSumColumns.
constexpr int64_t kColumnGrain = 16;

}  // namespace

CpuDevice::CpuDevice() {
  info_.kind = DeviceKind::kCpu;
  info_.name = "cpu";
  info_.cores = AvailableCpus();
}

absl::StatusOr<DeviceBuffer> CpuDevice::Allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  return DeviceBuffer(p, bytes, &FreeHost);
}

void CpuDevice::CopyToDevice(const void* host, void* device, size_t bytes) {
  if (bytes > 0 && host != device) std::memcpy(device, host, bytes);
}

absl::Status CpuDevice::CopyToHost(const void* device, void* host, size_t bytes) {
  if (bytes > 0 && host != device) std::memcpy(host, device, bytes);
  return absl::OkStatus();
}

void CpuDevice::Copy(const float* src, float* dst, int64_t n) {
  if (n > 0 && src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void CpuDevice::Fill(float* x, int64_t n, float value) { std::fill_n(x, n, value); }

void CpuDevice::Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  ParallelGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CpuDevice::BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y) {
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(y + i * cols, row, static_cast<size_t>(cols) * sizeof(float));
  }
}

void CpuDevice::SumRows(const float* x, int64_t rows, int64_t cols, float* out) {
  // Row-major for the cache; per column the same order as kernels::SumRows.
  std::fill_n(out, cols, 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * cols;
    for (int64_t j = 0; j < cols; ++j) out[j] += r[j];
  }
}

void CpuDevice::Multiply(const float* a, const float* b, float* y, int64_t n) {
  ParallelFor(n, kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::Multiply(begin, end, a, b, y); });
}

void CpuDevice::Scale(float* x, int64_t n, float s) {
  ParallelFor(n, kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::Scale(begin, end, s, x); });
}

void CpuDevice::ReluForward(const float* x, float* y, int64_t n) {
  ParallelFor(n, kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::ReluForward(begin, end, x, y); });
}

void CpuDevice::ReluBackward(const float* x, const float* gy, float* gx, int64_t n) {
  ParallelFor(n, kElementGrain, [&](int, int64_t begin, int64_t end) {
    kernels::ReluBackward(begin, end, x, gy, gx);
  });
}

void CpuDevice::MaxPoolForward(const kernels::MaxPoolGeometry& g, int64_t images, const float* x,
                               float* y, int32_t* argmax) {
  ParallelFor(images, 1, [&](int, int64_t begin, int64_t end) {
    MaxPoolForwardImages(g, begin, end, x, y, argmax);
  });
}

void CpuDevice::MaxPoolBackward(const kernels::MaxPoolGeometry& g, int64_t images, const float* gy,
                                const int32_t* argmax, float* gx) {
  ParallelFor(images, 1, [&](int, int64_t begin, int64_t end) {
    MaxPoolBackwardImages(g, begin, end, gy, argmax, gx);
  });
}

void CpuDevice::Im2Col(const kernels::ConvShape& g, int64_t images, const float* x, float* col) {
  ParallelFor(images * g.pixels() * g.patch(), kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::Im2Col(g, begin, end, x, col); });
}

void CpuDevice::Col2Im(const kernels::ConvShape& g, int64_t images, const float* dcol, float* gx) {
  ParallelFor(images * g.in_image(), kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::Col2Im(g, begin, end, dcol, gx); });
}

void CpuDevice::DropoutForward(const kernels::DropoutParams& p, const float* x, float* mask,
                               float* y, int64_t n) {
  ParallelFor(n, kElementGrain, [&](int, int64_t begin, int64_t end) {
    kernels::DropoutForward(p, begin, end, x, mask, y);
  });
}

void CpuDevice::DenseForward(const DenseShape& s, const float* x, const float* w, const float* bias,
                             float* y) {
  if (!BlockedGemmAvailable()) {
    ComputeDevice::DenseForward(s, x, w, bias, y);
    return;
  }
  const GemmProblem p{.trans_a = Trans::kNo,
                      .trans_b = Trans::kYes,
                      .m = s.batch,
                      .n = s.units,
                      .k = s.inputs,
                      .a = x,
                      .lda = s.inputs,
                      .b = w,
                      .ldb = s.inputs,
                      .c = y,
                      .ldc = s.units,
                      .epilogue = {.column_bias = bias, .relu = s.relu}};
  BlockedGemm({&p, 1});
}

void CpuDevice::DenseBackward(const DenseShape& s, const float* x, const float* w, const float* y,
                              const float* gy, float* masked, float* dw, float* db, float* dx) {
  if (!BlockedGemmAvailable()) {
    ComputeDevice::DenseBackward(s, x, w, y, gy, masked, dw, db, dx);
    return;
  }
  // Per column, the same sums in the same order as SumRows.
  ParallelFor(s.units, kColumnGrain, [&](int, int64_t begin, int64_t end) {
    MaskAndSumColumns(s.relu ? y : nullptr, gy, s.batch, s.units, begin, end, masked, db);
  });
  if (s.relu) gy = masked;
  // dW = dY^T * X and dX = dY * W, in one region.
  const GemmProblem problems[] = {{.trans_a = Trans::kYes,
                                   .trans_b = Trans::kNo,
                                   .m = s.units,
                                   .n = s.inputs,
                                   .k = s.batch,
                                   .a = gy,
                                   .lda = s.units,
                                   .b = x,
                                   .ldb = s.inputs,
                                   .c = dw,
                                   .ldc = s.inputs,
                                   .epilogue = {}},
                                  {.trans_a = Trans::kNo,
                                   .trans_b = Trans::kNo,
                                   .m = s.batch,
                                   .n = s.inputs,
                                   .k = s.units,
                                   .a = gy,
                                   .lda = s.units,
                                   .b = w,
                                   .ldb = s.inputs,
                                   .c = dx,
                                   .ldc = s.inputs,
                                   .epilogue = {}}};
  BlockedGemm({problems, dx != nullptr ? 2u : 1u});
}

absl::StatusOr<LossSums> CpuDevice::SoftmaxCrossEntropy(const float* logits, int64_t n, int64_t k,
                                                        const int32_t* host_labels, float* grad) {
  LossSums s;
  for (int64_t i = 0; i < n; ++i) {
    bool correct = false;
    s.loss +=
        kernels::SoftmaxCrossEntropyRow(logits + i * k, k, host_labels[i], static_cast<double>(n),
                                        grad == nullptr ? nullptr : grad + i * k, &correct);
    s.correct += correct ? 1 : 0;
  }
  return s;
}

void CpuDevice::SoftmaxCrossEntropySum(const float* logits, int64_t n, int64_t k,
                                       const int32_t* labels, float* grad, double* sums) {
  // The CPU device never fails.
  const LossSums s = *SoftmaxCrossEntropy(logits, n, k, labels, grad);
  sums[0] += s.loss;
  sums[1] += static_cast<double>(s.correct);
}

void CpuDevice::GatherRows(const float* src, const int32_t* src_labels, int64_t row_floats,
                           const int32_t* index, const int64_t* cursor, int64_t n, float* dst,
                           int32_t* dst_labels) {
  const size_t row_bytes = static_cast<size_t>(row_floats) * sizeof(float);
  if (cursor != nullptr) index += *cursor;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * row_floats, src + static_cast<int64_t>(index[i]) * row_floats, row_bytes);
    dst_labels[i] = src_labels[index[i]];
  }
}

void CpuDevice::SgdUpdate(const kernels::SgdParams& o, float* p, const float* g, float* v,
                          int64_t n) {
  ParallelFor(n, kElementGrain,
              [&](int, int64_t begin, int64_t end) { SgdRange(o, begin, end, p, g, v); });
}

void CpuDevice::AdamUpdate(const kernels::AdamParams& o, float* p, const float* g, float* m,
                           float* v, int64_t n) {
  ParallelFor(n, kElementGrain,
              [&](int, int64_t begin, int64_t end) { AdamRange(o, begin, end, p, g, m, v); });
}

}  // namespace kubetrain
