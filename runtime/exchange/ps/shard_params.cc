#include "runtime/exchange/ps/shard_params.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::ps {

absl::Status ShardParams::Allocate(size_t n, const optim::OptimizerOptions& optimizer) {
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> opt = optim::MakeOptimizer(optimizer, n);
  if (!opt.ok()) return opt.status();
  optimizer_ = *std::move(opt);
  optimizer_state_.clear();
  for (auto& st : optimizer_->State()) optimizer_state_.push_back(st.second);
  pool_ = ReusePool<AlignedBuffer>();
  params_ = pool_.Writable(nullptr, [n] { return std::make_shared<AlignedBuffer>(n); });
  return absl::OkStatus();
}

std::span<float> ShardParams::Mutable() {
  // A pinned buffer stays as its readers saw it: the update goes to a
  // free buffer, which first gets the current parameters.
  std::shared_ptr<AlignedBuffer> out =
      pool_.Writable(params_, [&] { return std::make_shared<AlignedBuffer>(params_->size()); });
  if (out != params_) {
    std::copy(params_->data(), params_->data() + params_->size(), out->data());
    params_ = std::move(out);
  }
  return params_->span();
}

std::span<float> ShardParams::Overwrite() {
  ++version_;
  return Mutable();
}

void ShardParams::Start(int64_t global_step, optim::LrSchedule schedule) {
  global_step_ = global_step;
  schedule_ = std::move(schedule);
}

void ShardParams::Apply(std::span<const float> grad) {
  const ScopedFlushDenormals flush;
  optimizer_->Apply(Mutable(), grad, learning_rate());
  ++global_step_;
  ++version_;
  ++updates_;
}

void ShardParams::ApplyBlocks(optim::Optimizer::GradientBlocks fill) {
  const ScopedFlushDenormals flush;
  optimizer_->ApplyBlocks(Mutable(), fill, learning_rate());
  ++global_step_;
  ++version_;
  ++updates_;
}

std::shared_ptr<AlignedBuffer> ShardParams::SpareBuffer() {
  return pool_.Writable(nullptr, [&] { return std::make_shared<AlignedBuffer>(params_->size()); });
}

void ShardParams::CommitStep(std::shared_ptr<AlignedBuffer> next) {
  params_ = std::move(next);
  optimizer_->set_steps(optimizer_->steps() + 1);
  ++global_step_;
  ++version_;
  ++updates_;
}

}  // namespace kubetrain::ps
