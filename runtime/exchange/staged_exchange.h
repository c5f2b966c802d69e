// StagedExchange: runs an exchange that reads and writes host memory (the
// parameter-server client, the TCP-ring allreduce) for a model whose
// parameters and gradients live on a device (a GPU): gradients are copied
// into pinned host memory, the inner exchange runs on the host copies, and
// the parameters it returns are copied back. Gradients that backward has
// finished (GradientsReady) are staged and handed on at once, so the inner
// exchange can start moving them while backward goes on (allreduce
// buckets); Step stages only what is left.
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
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override;
  absl::Status Finish() override { return inner_.Finish(); }

 private:
  StagedExchange(Exchange& inner, ComputeDevice& device, int64_t size, DeviceBuffer host_params,
                 DeviceBuffer host_grads)
      : inner_(inner),
        device_(device),
        size_(size),
        host_params_(std::move(host_params)),
        host_grads_(std::move(host_grads)),
        staged_from_(size) {}

  // Copies grads [from, staged_from_) to the host copy.
  absl::Status Stage(std::span<const float> grads, int64_t from);
  absl::Status UploadParams(std::span<float> params);

  Exchange& inner_;
  ComputeDevice& device_;
  int64_t size_;
  DeviceBuffer host_params_, host_grads_;  // pinned host memory
  int64_t staged_from_;                    // host_grads_ holds [staged_from_, size_)
  absl::Status stage_error_;               // a failed copy in GradientsReady
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_STAGED_EXCHANGE_H_
