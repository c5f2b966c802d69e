// StagedExchange: runs an exchange that reads and writes host memory (the
// parameter-server client) for a model whose parameters and gradients live
// on a device (a GPU), through pinned host copies, with one host wait a
// step: as backward finishes gradients (GradientsReady) their copy to the
// host is queued behind it; Step queues the rest, waits for the copies (the
// inner exchange must read them), runs the inner exchange, and queues the
// copy of the parameters it returns back to the device, which the next
// step's kernels are ordered after. An inner exchange that takes gradients
// early (TakesGradientsEarly) gets each range as it is announced, after a
// wait for its copy.
// Spans passed to this exchange are in the device's memory.
// Not thread-safe (the trainer's one thread drives it).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_STAGED_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_STAGED_EXCHANGE_H_

#include <cstdint>
#include <memory>

#include "runtime/exchange/exchange.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::exchange {

class StagedExchange final : public Exchange {
 public:
  // Borrows both; allocates pinned host copies of `size` parameters and
  // gradients (ResourceExhausted when that fails).
  static absl::StatusOr<std::unique_ptr<StagedExchange>> Create(Exchange& inner,
                                                                ComputeDevice& device,
                                                                int64_t size);

  std::string name() const override { return inner_.name(); }
  absl::StatusOr<int64_t> Start(std::span<float> params) override;
  void GradientsReady(std::span<const float> grads, int64_t ready_from) override;
  bool TakesGradientsEarly() const override { return inner_.TakesGradientsEarly(); }
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override;
  absl::Status Finish() override { return inner_.Finish(); }
  // The inner exchange's, of the host copy of the last parameters it
  // returned (`params`, on the device, are the same values).
  absl::StatusOr<std::string> CheckpointNow(int64_t step, std::span<const float> params) override {
    return inner_.CheckpointNow(step, host_params_.span());
  }

 private:
  StagedExchange(Exchange& inner, ComputeDevice& device, int64_t size, DeviceBuffer host_params,
                 DeviceBuffer host_grads, std::unique_ptr<DeviceEvent> staged)
      : inner_(inner),
        device_(device),
        size_(size),
        host_params_(std::move(host_params)),
        host_grads_(std::move(host_grads)),
        staged_(std::move(staged)),
        staged_from_(size) {}

  // Queues the copy of grads [from, staged_from_) to the host copy.
  absl::Status Stage(std::span<const float> grads, int64_t from);
  // Waits for the queued copies.
  absl::Status WaitStaged();

  Exchange& inner_;
  ComputeDevice& device_;
  int64_t size_;
  DeviceBuffer host_params_, host_grads_;  // pinned host memory
  std::unique_ptr<DeviceEvent> staged_;    // after the last queued copy to host_grads_
  int64_t staged_from_;                    // host_grads_ is queued for [staged_from_, size_)
  absl::Status stage_error_;               // a failure in GradientsReady
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_STAGED_EXCHANGE_H_
