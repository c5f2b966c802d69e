// Dropout (inverted): in training each element is kept with probability
// 1 - rate and scaled by 1 / (1 - rate); at inference it is the identity.
// The mask comes from a counter-based hash of (seed, call, element), so runs
// are reproducible and Reseed() replays a mask exactly (used by gradient
// checks); the hash is runtime/tensor/kernels/dropout_mask.h, so every
// device draws the same mask. Computes through its ComputeDevice (layer.h).
// Not thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_DROPOUT_H_
#define KUBETRAIN_RUNTIME_NN_DROPOUT_H_

#include "runtime/nn/layer.h"

namespace kubetrain::nn {

class Dropout : public Layer {
 public:
  explicit Dropout(float rate) : rate_(rate) {}

  std::string kind() const override { return "dropout"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void InitParams(std::mt19937_64& rng) override { Reseed(rng()); }
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
  absl::Status Reserve(int64_t batch) override;
  int64_t ScratchBytes(int64_t batch) const override;
  std::string Describe() const override;

  // Restarts the mask sequence: the next training Forward uses call 0.
  void Reseed(uint64_t seed) {
    seed_ = seed;
    calls_ = 0;
  }
  // The next training Forward on the host counter is call `calls`: a
  // trainer that moves to step s (a resume, a step run again) keeps the
  // masks a function of the step.
  void SetCalls(uint64_t calls) { calls_ = calls; }
  // Training forwards take their call number from `calls` (device memory,
  // advanced by the device: a captured step) instead of counting on the
  // host; nullptr counts on the host again.
  void UseCallCounter(const uint64_t* calls) { device_calls_ = calls; }

 private:
  float rate_;
  uint64_t seed_ = 0;
  uint64_t calls_ = 0;
  const uint64_t* device_calls_ = nullptr;
  bool last_training_ = false;
  int64_t sample_ = 0;  // values per sample
  DeviceBuffer mask_;   // 0 or 1/(1-rate) per element of the last batch
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_DROPOUT_H_
