// LocalExchange: single-process training; the optimizer runs in-process on
// the whole flat parameter vector. Not thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_LOCAL_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_LOCAL_EXCHANGE_H_

#include <memory>

#include "runtime/exchange/exchange.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"

namespace kubetrain::exchange {

class LocalExchange final : public Exchange {
 public:
  LocalExchange(std::unique_ptr<optim::Optimizer> optimizer, optim::LrSchedule schedule)
      : optimizer_(std::move(optimizer)), schedule_(std::move(schedule)) {}

  std::string name() const override { return "local"; }
  absl::StatusOr<int64_t> Start(std::span<float> params) override;
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override;
  absl::Status Finish() override { return absl::OkStatus(); }
  std::optional<DeviceStepPlan> UseDeviceScalars(const kernels::StepScalars* scalars) override;
  absl::Status QueueStep(std::span<const float> grads, std::span<float> params) override;
  absl::StatusOr<int64_t> StepQueued(int64_t step, std::span<const float> params) override;

  float LearningRate(int64_t step) const { return schedule_.At(step); }

 private:
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrSchedule schedule_;
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_LOCAL_EXCHANGE_H_
