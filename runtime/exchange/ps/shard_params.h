// ShardParams: one PS shard's parameter storage and what changes it: the
// parameters, copy-on-write so a reader may pin them and read unlocked; the
// optimizer and its state; the learning-rate schedule; the global step and
// the version. PsShard owns one; its update policy (update_policy.h)
// applies steps to it, whole or part by part.
//
// Not thread-safe: its owner's lock guards it (PsShard::mu_).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_PARAMS_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_PARAMS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/exchange/ps/reuse_pool.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::ps {

class ShardParams {
 public:
  ShardParams() = default;
  ShardParams(const ShardParams&) = delete;
  ShardParams& operator=(const ShardParams&) = delete;

  // `n` parameters (zero) and a fresh optimizer over them. Once.
  absl::Status Allocate(size_t n, const optim::OptimizerOptions& optimizer);
  size_t size() const { return params_ == nullptr ? 0 : params_->size(); }

  // The parameters as they are now. Holding `Pin()` keeps this buffer
  // unchanged after the owner's lock is released: the next update writes a
  // copy instead (PullResult::pin).
  std::span<const float> values() const { return std::as_const(*params_).span(); }
  std::shared_ptr<const AlignedBuffer> Pin() const { return params_; }
  // Changes whenever the parameters do.
  uint64_t version() const { return version_; }
  int64_t global_step() const { return global_step_; }
  // Steps applied by this process (whole or by rounds).
  int64_t updates() const { return updates_; }

  // Starting values (initialisation, a restore): write them here, then
  // Start. The optimizer's state is restored through optimizer().
  std::span<float> Overwrite();
  void Start(int64_t global_step, optim::LrSchedule schedule);
  // Start was called: the parameters are the job's and steps may apply.
  bool started() const { return schedule_.has_value(); }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }

  // One whole step: the gradient, or the gradient made block by block (an
  // average of slots, never through memory whole). The optimizer runs on
  // the calling thread, flushing subnormals (denormals.h).
  void Apply(std::span<const float> grad);
  void ApplyBlocks(optim::Optimizer::GradientBlocks fill);

  // A step applied part by part (a pipelined round): the parts go into a
  // spare buffer with Optimizer::ApplyPart at learning_rate(), keeping
  // optimizer_state() to undo them; CommitStep then makes the buffer the
  // parameters and counts the step.
  float learning_rate() const { return schedule_->At(global_step_); }
  // A buffer no reader holds and never the current parameters.
  std::shared_ptr<AlignedBuffer> SpareBuffer();
  // The optimizer's state buffers (fixed once made), for per-part undo.
  const std::vector<std::span<float>>& optimizer_state() const { return optimizer_state_; }
  void CommitStep(std::shared_ptr<AlignedBuffer> next);

 private:
  // The parameters for writing: if a reader pins them, first a copy in a
  // buffer nobody pins, which becomes params_.
  std::span<float> Mutable();

  std::shared_ptr<AlignedBuffer> params_;
  ReusePool<AlignedBuffer> pool_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::vector<std::span<float>> optimizer_state_;
  std::optional<optim::LrSchedule> schedule_;
  int64_t global_step_ = 0;
  uint64_t version_ = 0;
  int64_t updates_ = 0;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_PARAMS_H_
