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

}  // namespace kubetrain::exchange
