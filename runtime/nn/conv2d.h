// Conv2D over NHWC images by im2col + GEMM, or directly (direct_conv.h)
// when the patch has under 32 values, where im2col's GEMM would be too
// shallow. The batch is cut into ParallelFor chunks of whole images
// (runtime/tensor/parallel_for.h), and each chunk into groups of images
// whose im2col matrix fits in half a core's L2 cache; each group is one
// single-threaded GEMM. Backward recomputes the
// group's im2col matrix rather than keeping the whole batch's, and sums the
// per-chunk weight gradients in chunk order (the same bits for the same
// thread count).
// Weights are {filters, kernel_h, kernel_w, in_channels}; bias {filters}.
// Padding "same" (stride 1 keeps the size) or "valid" or an explicit count.
// On a device without host memory (a GPU), and on any device with
// ConvAlgorithm::kDevice, the layer runs im2col + GEMM through its
// ComputeDevice's operations instead: one GEMM per group of whole images
// whose im2col matrix fits in kDeviceColBytes, col2im as a gather.
// Not thread-safe (keeps per-chunk scratch buffers).
#ifndef KUBETRAIN_RUNTIME_NN_CONV2D_H_
#define KUBETRAIN_RUNTIME_NN_CONV2D_H_

#include <vector>

#include "runtime/nn/direct_conv.h"
#include "runtime/nn/layer.h"
#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/kernels/im2col.h"

namespace kubetrain::nn {

enum class ConvAlgorithm {
  kAuto,    // kDirect for patches (kernel^2 * in_channels) under 32 values, else kIm2Col
  kIm2Col,  // im2col + GEMM
  kDirect,  // runtime/nn/direct_conv.h
  kDevice,  // im2col + GEMM through the ComputeDevice (what GPUs run)
};

struct Conv2DOptions {
  int64_t filters = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  // Zero padding on each side; -1 means "same" (kernel / 2).
  int64_t padding = -1;
  ConvAlgorithm algorithm = ConvAlgorithm::kAuto;
};

class Conv2D : public Layer {
 public:
  explicit Conv2D(Conv2DOptions options) : opt_(options) {}

  std::string kind() const override { return "conv2d"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void DeclareParams(FlatParameters& flat, const std::string& prefix) override;
  void BindParams(FlatParameters& flat) override;
  void InitParams(std::mt19937_64& rng) override;
  int64_t NumParams() const override { return opt_.filters * patch_ + opt_.filters; }
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
  int64_t ForwardFlops(int64_t batch) const override;
  int64_t BackwardFlops(int64_t batch) const override;
  int64_t InputGradFlops(int64_t batch) const override { return ForwardFlops(batch); }
  absl::Status Reserve(int64_t batch) override;
  int64_t ScratchBytes(int64_t batch) const override;
  bool FuseRelu() override {
    relu_ = true;
    return true;
  }
  std::string Describe() const override;

 private:
  // Per-chunk scratch: an image group's im2col matrix and its gradient,
  // and the chunk's weight and bias gradients.
  struct Scratch {
    AlignedBuffer col, dcol, dw, db, gy;  // gy: grad_out through the fused ReLU
  };

  // Images per GEMM: as many as keep the im2col matrix near kColBytes.
  int64_t GroupImages() const;
  // The device path (see above), and its images per GEMM.
  bool OnDevicePath() {
    return opt_.algorithm == ConvAlgorithm::kDevice || !device().host_memory();
  }
  int64_t DeviceGroupImages() const;
  ::kubetrain::kernels::ConvShape ConvShapeOf() const;
  void ForwardOnDevice(const TensorView& in, const TensorView& out);
  void BackwardOnDevice(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                        const TensorView* grad_in);
  void EnsureScratch(int chunks, bool backward);
  ConvGeometry Geometry() const;
  // wt_ = W transposed to {kernel, kernel, in_c, filters}.
  void TransposeWeights();
  void ForwardDirect(const TensorView& in, const TensorView& out);
  void BackwardDirect(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                      const TensorView* grad_in);
  // col{count * out_h * out_w, patch} for images [first, first + count).
  void Im2Col(const float* in, int64_t first, int64_t count, float* col) const;
  // Overwrites grad_in for images [first, first + count) from their dcol.
  void Col2Im(const float* dcol, int64_t first, int64_t count, float* grad_in) const;

  Conv2DOptions opt_;
  int64_t pad_ = 0;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t patch_ = 0;  // kernel * kernel * in_c
  int w_index_ = -1, b_index_ = -1;
  TensorView w_, b_, dw_, db_;
  bool direct_ = false;
  bool relu_ = false;
  std::vector<Scratch> scratch_;              // one per ParallelFor chunk
  AlignedBuffer wt_;                          // direct only
  DeviceBuffer dev_col_, dev_dcol_, dev_gy_;  // device path
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_CONV2D_H_
