#include "runtime/exchange/local_exchange.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::exchange {

absl::StatusOr<int64_t> LocalExchange::Start(std::span<float> params) {
  if (params.size() != optimizer_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("local exchange: model has ", params.size(),
                                                   " parameters, optimizer ", optimizer_->size()));
  }
  return optimizer_->steps();
}

absl::StatusOr<int64_t> LocalExchange::Step(int64_t step, std::span<const float> grads,
                                            std::span<float> params) {
  if (grads.size() != params.size() || params.size() != optimizer_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("local exchange: gradient of ", grads.size(),
                                                   " values for ", optimizer_->size(),
                                                   " parameters"));
  }
  optimizer_->Apply(params, grads, schedule_.At(step));
  return step + 1;
}

std::optional<DeviceStepPlan> LocalExchange::UseDeviceScalars(const kernels::StepScalars* scalars) {
  optimizer_->UseDeviceScalars(scalars);
  if (scalars == nullptr) return std::nullopt;
  return DeviceStepPlan{optim::MakeUpdatePlan(schedule_.plan(), optimizer_->options()),
                        optimizer_->steps()};
}

absl::Status LocalExchange::QueueStep(std::span<const float> grads, std::span<float> params) {
  if (grads.size() != params.size() || params.size() != optimizer_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("local exchange: gradient of ", grads.size(),
                                                   " values for ", optimizer_->size(),
                                                   " parameters"));
  }
  // Queued with the device's scalars; the count is StepQueued's to make.
  const int64_t steps = optimizer_->steps();
  optimizer_->Apply(params, grads, /*lr: the device's*/ 0.0f);
  optimizer_->set_steps(steps);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalExchange::StepQueued(int64_t step, std::span<const float>) {
  optimizer_->set_steps(optimizer_->steps() + 1);
  return step + 1;
}

}  // namespace kubetrain::exchange
