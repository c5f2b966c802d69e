// Layer: one step of a sequential model. Activations are batch-major and
// images are NHWC ({batch, height, width, channels}), so a convolution is a
// single GEMM over the whole batch.
//
// Lifecycle: SetDevice -> Build(input shape) -> DeclareParams(flat) ->
// BindParams(flat) -> InitParams(rng) -> Reserve(batch) -> Forward/Backward
// many times. Every tensor a layer gets or keeps lives in its device's
// memory, and it computes through that ComputeDevice (the CPU unless the
// model sets another); InitParams always writes host memory (the model
// binds a host copy of the parameters for it).
// Backward OVERWRITES the layer's parameter gradients with d(loss)/d(param)
// for the batch (it does not accumulate across calls).
// Not thread-safe: a layer holds per-batch scratch state.
#ifndef KUBETRAIN_RUNTIME_NN_LAYER_H_
#define KUBETRAIN_RUNTIME_NN_LAYER_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/tensor/cpu_device.h"
#include "runtime/tensor/flat_buffer.h"
#include "runtime/tensor/shape.h"
#include "runtime/tensor/tensor_view.h"

namespace kubetrain::nn {

class Layer {
 public:
  virtual ~Layer() = default;

  // The device Forward and Backward compute on; borrowed, outlives the
  // layer. Set before Build; the layer's own CpuDevice when never set.
  void SetDevice(ComputeDevice* device) { device_ = device; }
  ComputeDevice& device() { return device_ != nullptr ? *device_ : cpu_; }
  const ComputeDevice& device() const {
    return device_ != nullptr ? *device_ : static_cast<const ComputeDevice&>(cpu_);
  }

  // Kind as written in model files: "dense", "conv2d", ...
  virtual std::string kind() const = 0;

  // Configures the layer for a per-sample input shape (no batch dimension)
  // and returns the per-sample output shape, or InvalidArgument when the
  // shape does not fit the layer.
  virtual absl::StatusOr<Shape> Build(const Shape& input_shape) = 0;

  // Reserves this layer's tensors in the model's flat buffers.
  virtual void DeclareParams(FlatParameters& flat, const std::string& prefix) {}
  // Takes views of the tensors it declared (after flat.Allocate()).
  virtual void BindParams(FlatParameters& flat) {}
  virtual void InitParams(std::mt19937_64& rng) {}
  virtual int64_t NumParams() const { return 0; }

  // Allocates the scratch Forward and Backward need for batches of up to
  // `batch` on the device (larger batches grow it later);
  // ResourceExhausted when it does not fit. ScratchBytes says how much.
  virtual absl::Status Reserve(int64_t batch) { return absl::OkStatus(); }
  virtual int64_t ScratchBytes(int64_t batch) const { return 0; }

  // in: {N, input_shape...}; out: {N, output_shape...}, preallocated.
  virtual void Forward(const TensorView& in, const TensorView& out, bool training) = 0;

  // grad_out: d(loss)/d(out). Writes d(loss)/d(in) into grad_in when it is
  // non-null (the first layer passes null) and overwrites parameter grads.
  // `in` and `out` are the tensors of the matching Forward call.
  virtual void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                        const TensorView* grad_in) = 0;

  // Floating-point operations for one forward / backward pass of `batch`
  // samples (multiply-add = 2), for throughput reporting.
  // BackwardFlops includes InputGradFlops, which is skipped when Backward
  // gets no grad_in.
  virtual int64_t ForwardFlops(int64_t batch) const { return 0; }
  virtual int64_t BackwardFlops(int64_t batch) const { return 0; }
  virtual int64_t InputGradFlops(int64_t batch) const { return 0; }

  // Asks the layer to apply ReLU to its own output in Forward, and to read
  // Backward's grad_out as the gradient of that ReLU's output, so that the
  // model can drop a following relu layer: one pass over the activations
  // less each way, done while they are in cache. Returns false when the
  // layer cannot (the default); call before the first Forward.
  virtual bool FuseRelu() { return false; }

  // Human-readable configuration, e.g. "dense(units=128)".
  virtual std::string Describe() const { return kind(); }

 protected:
  // Grows a scratch buffer on the device; failing here is a programmer
  // error (Reserve sized it at start), so it is a check.
  void GrowScratch(DeviceBuffer& buffer, size_t bytes);

 private:
  ComputeDevice* device_ = nullptr;
  CpuDevice cpu_;
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_LAYER_H_
