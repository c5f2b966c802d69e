#include "runtime/exchange/staged_exchange.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::exchange {

absl::StatusOr<std::unique_ptr<StagedExchange>> StagedExchange::Create(Exchange& inner,
                                                                       ComputeDevice& device,
                                                                       int64_t size) {
  const size_t bytes = static_cast<size_t>(size) * sizeof(float);
  absl::StatusOr<DeviceBuffer> p = device.AllocatePinnedHost(bytes);
  if (!p.ok()) return p.status();
  absl::StatusOr<DeviceBuffer> g = device.AllocatePinnedHost(bytes);
  if (!g.ok()) return g.status();
  absl::StatusOr<std::unique_ptr<DeviceEvent>> e = device.NewEvent();
  if (!e.ok()) return e.status();
  return std::unique_ptr<StagedExchange>(
      new StagedExchange(inner, device, size, *std::move(p), *std::move(g), *std::move(e)));
}

absl::Status StagedExchange::Stage(std::span<const float> grads, int64_t from) {
  if (static_cast<int64_t>(grads.size()) != size_) {
    return absl::InvalidArgumentError(absl::StrCat("staged exchange: gradient of ", grads.size(),
                                                   " values for ", size_, " parameters"));
  }
  if (from >= staged_from_) return absl::OkStatus();
  const size_t count = static_cast<size_t>(staged_from_ - from);
  device_.CopyToHostAsync(grads.data() + from, host_grads_.data() + from, count * sizeof(float));
  staged_->Record();
  staged_from_ = from;
  return absl::OkStatus();
}

absl::Status StagedExchange::WaitStaged() { return staged_->Wait(); }

absl::StatusOr<int64_t> StagedExchange::Start(std::span<float> params) {
  if (static_cast<int64_t>(params.size()) != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("staged exchange: model has ", params.size(), " parameters, staging ", size_));
  }
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  if (absl::Status s = device_.CopyToHost(params.data(), host_params_.data(), bytes); !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> step = inner_.Start(host_params_.span());
  if (!step.ok()) return step;
  device_.CopyToDevice(host_params_.data(), params.data(), bytes);
  if (absl::Status s = device_.Synchronize(); !s.ok()) return s;
  return step;
}

void StagedExchange::GradientsReady(std::span<const float> grads, int64_t ready_from) {
  if (!stage_error_.ok()) return;
  stage_error_ = Stage(grads, ready_from);
  if (!stage_error_.ok() || !inner_.TakesGradientsEarly()) return;
  stage_error_ = WaitStaged();
  if (stage_error_.ok()) inner_.GradientsReady(host_grads_.span(), ready_from);
}

absl::StatusOr<int64_t> StagedExchange::Step(int64_t step, std::span<const float> grads,
                                             std::span<float> params) {
  if (static_cast<int64_t>(params.size()) != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("staged exchange: model has ", params.size(), " parameters, staging ", size_));
  }
  absl::Status staged = stage_error_.ok() ? Stage(grads, 0) : stage_error_;
  if (staged.ok()) staged = WaitStaged();  // the step's one wait: the inner exchange reads them
  staged_from_ = size_;
  stage_error_ = absl::OkStatus();
  if (!staged.ok()) return staged;
  absl::StatusOr<int64_t> next = inner_.Step(step, host_grads_.span(), host_params_.span());
  if (!next.ok()) return next;
  // Queued: the next step's kernels run after it, and host_params_ is not
  // written again before the next Step's wait, which comes after it.
  device_.CopyToDeviceAsync(host_params_.data(), params.data(),
                            static_cast<size_t>(size_) * sizeof(float));
  return next;
}

}  // namespace kubetrain::exchange
