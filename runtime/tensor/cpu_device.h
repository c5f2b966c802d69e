// CpuDevice: the ComputeDevice over host memory: GEMMs through
// ParallelGemm (OpenBLAS), element loops through ParallelFor, each running
// the shared host/device kernels vectorised for the CPU's best ISA. Dense
// layers run on BlockedGemm (blocked_gemm.h) where the CPU has its kernels:
// the forward is one region (GEMM, bias and ReLU), the backward two (the
// ReLU mask with the bias gradient, then dW and dX together).
// Holds no state beyond its description; not thread-safe (the interface's
// contract), though concurrent use of disjoint buffers is harmless.
#ifndef KUBETRAIN_RUNTIME_TENSOR_CPU_DEVICE_H_
#define KUBETRAIN_RUNTIME_TENSOR_CPU_DEVICE_H_

#include "runtime/tensor/compute_device.h"

namespace kubetrain {

class CpuDevice final : public ComputeDevice {
 public:
  CpuDevice();

  const DeviceInfo& info() const override { return info_; }
  bool host_memory() const override { return true; }
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) override;
  absl::StatusOr<DeviceBuffer> AllocatePinnedHost(size_t bytes) override { return Allocate(bytes); }
  DeviceMemory Memory() override { return {}; }

  void CopyToDevice(const void* host, void* device, size_t bytes) override;
  absl::Status CopyToHost(const void* device, void* host, size_t bytes) override;
  void CopyToHostAsync(const void* device, void* host, size_t bytes) override {
    CopyToDevice(device, host, bytes);
  }
  void CopyToDeviceAsync(const void* host, void* device, size_t bytes) override {
    CopyToDevice(host, device, bytes);
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> NewEvent() override {
    return std::make_unique<ImmediateEvent>();
  }
  void Copy(const float* src, float* dst, int64_t n) override;
  void Fill(float* x, int64_t n, float value) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) override;
  void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y) override;
  void SumRows(const float* x, int64_t rows, int64_t cols, float* out) override;
  void Multiply(const float* a, const float* b, float* y, int64_t n) override;
  void Scale(float* x, int64_t n, float s) override;
  void ReluForward(const float* x, float* y, int64_t n) override;
  void ReluBackward(const float* x, const float* gy, float* gx, int64_t n) override;
  void MaxPoolForward(const kernels::MaxPoolGeometry& g, int64_t images, const float* x, float* y,
                      int32_t* argmax) override;
  void MaxPoolBackward(const kernels::MaxPoolGeometry& g, int64_t images, const float* gy,
                       const int32_t* argmax, float* gx) override;
  void Im2Col(const kernels::ConvShape& g, int64_t images, const float* x, float* col) override;
  void Col2Im(const kernels::ConvShape& g, int64_t images, const float* dcol, float* gx) override;
  void DropoutForward(const kernels::DropoutParams& p, const float* x, float* mask, float* y,
                      int64_t n) override;
  void DenseForward(const DenseShape& s, const float* x, const float* w, const float* bias,
                    float* y) override;
  void DenseBackward(const DenseShape& s, const float* x, const float* w, const float* y,
                     const float* gy, float* masked, float* dw, float* db, float* dx) override;
  absl::StatusOr<LossSums> SoftmaxCrossEntropy(const float* logits, int64_t n, int64_t k,
                                               const int32_t* host_labels, float* grad) override;
  void SoftmaxCrossEntropySum(const float* logits, int64_t n, int64_t k, const int32_t* labels,
                              float* grad, double* sums) override;
  void GatherRows(const float* src, const int32_t* src_labels, int64_t row_floats,
                  const int32_t* index, const int64_t* cursor, int64_t n, float* dst,
                  int32_t* dst_labels) override;
  void AdvanceStep(const kernels::StepPlan& plan, int64_t steps,
                   kernels::StepScalars* scalars) override {
    kernels::AdvanceStepScalars(plan, steps, scalars);
  }
  void SgdUpdate(const kernels::SgdParams& o, float* p, const float* g, float* v,
                 int64_t n) override;
  void AdamUpdate(const kernels::AdamParams& o, float* p, const float* g, float* m, float* v,
                  int64_t n) override;

 private:
  DeviceInfo info_;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_CPU_DEVICE_H_
