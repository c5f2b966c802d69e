#include "runtime/exchange/checkpoint_policy.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::exchange {

CheckpointPolicy::CheckpointPolicy(CheckpointPolicyOptions options, const Clock& clock, Logger log,
                                   metrics::RuntimeMetrics* metrics)
    : options_(std::move(options)),
      clock_(clock),
      log_(std::move(log)),
      metrics_(metrics),
      last_seconds_(clock.NowSeconds()) {}

void CheckpointPolicy::Restart(int64_t step) {
  last_step_ = step;
  last_seconds_ = clock_.NowSeconds();
}

bool CheckpointPolicy::Due(int64_t step) const {
  if (!enabled()) return false;
  const bool by_steps = options_.every_steps > 0 && step - last_step_ >= options_.every_steps;
  const bool by_time =
      options_.every_seconds > 0 && clock_.NowSeconds() - last_seconds_ >= options_.every_seconds;
  return by_steps || by_time;
}

bool CheckpointPolicy::MaybeWrite(int64_t step, Fill fill) {
  if (!Due(step)) return false;
  absl::StatusOr<std::string> path = Write(step, fill);
  // Success or not, the next periodic write is one interval from now.
  Restart(step);
  if (path.ok()) return true;
  ++failures_;
  if (metrics_ != nullptr) metrics_->AddCheckpointFailure();
  log_(absl::StrCat("warning: checkpoint at step ", step, " failed (", failures_,
                    " so far), training goes on and it is tried again when the next is due: ",
                    path.status().message()));
  return false;
}

absl::StatusOr<std::string> CheckpointPolicy::WriteNow(int64_t step, Fill fill) {
  if (!enabled()) return absl::FailedPreconditionError("no --checkpoint-dir configured");
  absl::StatusOr<std::string> path = Write(step, fill);
  if (path.ok()) Restart(step);
  return path;
}

absl::StatusOr<std::string> CheckpointPolicy::Write(int64_t step, Fill fill) {
  const double t0 = clock_.NowSeconds();
  CheckpointContents c;
  if (absl::Status s = fill(c); !s.ok()) return s;
  CheckpointView view;
  v1::CheckpointHeader& h = view.header;
  h.set_shard_index(c.shard_index);
  h.set_num_shards(c.num_shards);
  h.mutable_range()->set_offset(static_cast<uint64_t>(c.offset));
  h.mutable_range()->set_length(c.params.size());
  h.set_num_params(static_cast<uint64_t>(c.num_params));
  h.set_global_step(step);
  h.set_total_steps(c.total_steps);
  h.set_optimizer(c.optimizer);
  h.set_optimizer_steps(c.optimizer_steps);
  for (int64_t clock : c.worker_clocks) h.add_worker_clocks(clock);
  if (c.data_position) SetDataPosition(*c.data_position, h);
  for (int worker : c.left_workers) h.add_left_workers(worker);
  view.params = c.params;
  for (const auto& [name, values] : c.states) {
    h.add_state_names(name);
    view.states.push_back(values);
  }
  absl::StatusOr<std::string> path = options_.write
                                         ? options_.write(options_.dir, view, options_.keep)
                                         : WriteCheckpoint(options_.dir, view, options_.keep);
  if (!path.ok()) return path.status();
  const double took = clock_.NowSeconds() - t0;
  if (metrics_ != nullptr) metrics_->RecordCheckpoint(took);
  log_(absl::StrCat("checkpoint ", *path, " step=", step,
                    " took=", static_cast<int64_t>(took * 1000), "ms"));
  return path;
}

}  // namespace kubetrain::exchange
