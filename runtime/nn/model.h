// Model: a sequence of layers whose parameters and gradients live in one
// flat buffer each (FlatParameters). Owns per-layer activation buffers,
// grown to the largest batch seen. Parameters, gradients and activations
// live on the model's ComputeDevice (the CPU unless Create gets another),
// and the layers compute there; params(), grads() and Forward's logits are
// in that device's memory.
// Not thread-safe: one Model per training thread.
#ifndef KUBETRAIN_RUNTIME_NN_MODEL_H_
#define KUBETRAIN_RUNTIME_NN_MODEL_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/nn/layer.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/tensor/flat_buffer.h"

namespace kubetrain::nn {

class Model {
 public:
  // Builds every layer in order for a per-sample input shape and lays out
  // the flat parameter buffer. Errors name the layer: "layers[3] (dense): ...".
  // `device` is borrowed and must outlive the model; nullptr means a CPU
  // device the model owns.
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::vector<std::unique_ptr<Layer>> layers,
                                                       const Shape& input_shape,
                                                       ComputeDevice* device = nullptr);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return shapes_.back(); }
  int64_t num_params() const { return flat_.size(); }
  std::span<float> params() { return flat_.params(); }
  std::span<const float> params() const { return flat_.params(); }
  std::span<float> grads() { return flat_.grads(); }
  const FlatParameters& flat() const { return flat_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  ComputeDevice& device() { return *device_; }

  // Allocates activations and layer scratch for batches of up to `batch`.
  // On a device with its own memory, first checks that they fit in what is
  // free: ResourceExhausted, in one line naming the batch size to lower,
  // when they do not. Forward grows the buffers itself when not called.
  absl::Status Reserve(int64_t batch);
  // Bytes Reserve(batch) needs: activations, their gradients, scratch.
  int64_t BatchBytes(int64_t batch) const;

  // Initialises every parameter from `seed` (deterministic).
  void InitParams(uint64_t seed);
  // Dropout layers draw their masks for training forward number `*calls`
  // (device memory, advanced by the device: a captured step), not their
  // host counters; nullptr goes back to those.
  void UseForwardCounter(const uint64_t* calls);
  // The dropout layers' next training forward (host counters) is number
  // `calls`: the trainer sets the step it continues from, so a resumed or
  // re-run step draws the masks an uninterrupted run would.
  void SetForwardCalls(uint64_t calls);

  // Runs the batch {batch, input_shape...} (sample-major floats in host
  // memory) through the layers; returns the logits (device memory), valid
  // until the next Forward.
  TensorView Forward(const float* inputs, int64_t batch, bool training);
  // The model's input buffer for a batch of up to `batch` (device memory,
  // grown as Forward would), for a caller that fills it on the device
  // (a data set resident there); then ForwardInput runs it without a copy.
  float* InputBuffer(int64_t batch);
  TensorView ForwardInput(int64_t batch, bool training);

  // Back-propagates d(loss)/d(logits) of the last Forward; fills grads().
  // After each layer with parameters, `on_ready` (when set) learns that
  // every gradient at flat index >= the layer's first parameter is final.
  void Backward(const TensorView& grad_logits,
                const std::function<void(int64_t ready_from)>& on_ready = nullptr);

  // Training FLOPs (forward + backward) for one batch.
  int64_t TrainFlops(int64_t batch) const;

  // One line per layer with output shape and parameter count.
  std::string Summary() const;

 private:
  Model(std::vector<std::unique_ptr<Layer>> layers, std::vector<Shape> shapes,
        ComputeDevice* device);
  absl::Status Init();
  absl::Status Allocate(int64_t batch);
  // Where layer i's output lives: a skipped layer's is its input.
  float* OutputData(size_t i);

  std::unique_ptr<ComputeDevice> own_device_;  // when Create got none
  ComputeDevice* device_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Shape input_shape_;
  std::vector<Shape> shapes_;  // output shape of each layer
  FlatParameters flat_;
  int64_t capacity_ = 0;
  DeviceBuffer input_;              // copy of the last input batch
  std::vector<DeviceBuffer> acts_;  // output of each layer
  DeviceBuffer grad_a_, grad_b_;    // ping-pong activation gradients
  int64_t batch_ = 0;
  // Layers before this index have no parameters, so no gradient needs to
  // flow into them: Backward stops here and passes no grad_in.
  size_t first_trainable_ = 0;
  // Flat offset of each layer's first parameter (its tensors are
  // contiguous); -1 for layers without parameters.
  std::vector<int64_t> param_offset_;
  // skip_[i]: Forward and Backward skip layer i, whose output is its input:
  // a relu that layer i - 1 applies itself (Layer::FuseRelu), or a flatten
  // (the same data under another shape).
  std::vector<bool> skip_;
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_MODEL_H_
