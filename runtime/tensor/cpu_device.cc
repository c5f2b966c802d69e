#include "runtime/tensor/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/nn/kernels/relu.h"
#include "runtime/tensor/kernels/cpu_clones.h"
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
KT_CPU_CLONES void MaxPoolForwardImages(const nn::kernels::MaxPoolGeometry& g, int64_t begin,
                                        int64_t end, const float* x, float* y, int32_t* argmax) {
  nn::kernels::MaxPoolForward(g, begin, end, x, y, argmax);
}

KT_CPU_CLONES void MaxPoolBackwardImages(const nn::kernels::MaxPoolGeometry& g, int64_t begin,
                                         int64_t end, const float* gy, const int32_t* argmax,
                                         float* gx) {
  nn::kernels::MaxPoolBackward(g, begin, end, gy, argmax, gx);
}

KT_CPU_CLONES void SgdRange(const kernels::SgdParams& o, int64_t begin, int64_t end, float* p,
                            const float* g, float* v) {
  kernels::SgdUpdate(o, begin, end, p, g, v);
}

KT_CPU_CLONES void AdamRange(const kernels::AdamParams& o, int64_t begin, int64_t end, float* p,
                             const float* g, float* m, float* v) {
  kernels::AdamUpdate(o, begin, end, p, g, m, v);
}

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
              [&](int, int64_t begin, int64_t end) { nn::kernels::ReluForward(begin, end, x, y); });
}

void CpuDevice::ReluBackward(const float* x, const float* gy, float* gx, int64_t n) {
  ParallelFor(n, kElementGrain, [&](int, int64_t begin, int64_t end) {
    nn::kernels::ReluBackward(begin, end, x, gy, gx);
  });
}

void CpuDevice::MaxPoolForward(const nn::kernels::MaxPoolGeometry& g, int64_t images,
                               const float* x, float* y, int32_t* argmax) {
  ParallelFor(images, 1, [&](int, int64_t begin, int64_t end) {
    MaxPoolForwardImages(g, begin, end, x, y, argmax);
  });
}

void CpuDevice::MaxPoolBackward(const nn::kernels::MaxPoolGeometry& g, int64_t images,
                                const float* gy, const int32_t* argmax, float* gx) {
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
