#include "runtime/exchange/ps/sync_aggregator.h"

#include <algorithm>
#include <utility>

#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::ps {
namespace {

// out[0, n) = the mean of slots[k][begin, begin + n), summed in slot (worker)
// order so the result never depends on arrival order: a sync step's
// gradient, made a block at a time right before the optimizer reads it.
void AverageSlots(const std::vector<const float*>& slots, size_t begin, size_t n, float* out) {
  const float inv = 1.0f / static_cast<float>(slots.size());
  const float* s0 = slots[0] + begin;
  for (size_t i = 0; i < n; ++i) out[i] = s0[i];
  for (size_t k = 1; k < slots.size(); ++k) {
    const float* s = slots[k] + begin;
    for (size_t i = 0; i < n; ++i) out[i] += s[i];
  }
  for (size_t i = 0; i < n; ++i) out[i] *= inv;
}

}  // namespace

SyncAggregator::SyncAggregator(const ConsistencyRule& rule, int num_workers, bool pipeline)
    : rule_(rule), pipeline_(pipeline), workers_(static_cast<size_t>(std::max(num_workers, 1))) {}

int64_t SyncAggregator::NumChunks(const ShardParams& params) const {
  return data_plane::NumChunks(static_cast<int64_t>(params.size()));
}

bool SyncAggregator::Push(ShardParams& params, int worker, std::span<const float> gradient,
                          int64_t /*pulled_step*/) {
  Worker& w = workers_[worker];
  w.gradient = gradient.data();
  w.accepted = true;
  ++accepted_;
  if (pipeline_) {
    // The whole gradient at once (gRPC, or a push that was not chunked):
    // every chunk of it counts in the round.
    w.ready = NumChunks(params);
    return Advance(params);
  }
  return MaybeApply(params);
}

int SyncAggregator::ActiveWorkers() const {
  int n = 0;
  for (const Worker& w : workers_) n += w.counted && !w.done ? 1 : 0;
  return n;
}

int SyncAggregator::CountedWorkers() const { return ActiveWorkers(); }

bool SyncAggregator::Counts(int worker) const {
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return false;
  const Worker& w = workers_[worker];
  return w.counted && !w.done;
}

bool SyncAggregator::RoundEmpty() const {
  if (accepted_ > 0 || round_.applied > 0) return false;
  for (const Worker& w : workers_) {
    if (w.ready > 0) return false;
  }
  return true;
}

void SyncAggregator::Recount() {
  for (Worker& w : workers_) {
    if (!w.joining) continue;
    w.joining = false;
    w.counted = true;
  }
}

bool SyncAggregator::Join(ShardParams& params, int worker) {
  if (worker < 0) return false;
  if (worker >= static_cast<int>(workers_.size())) {
    // Ids between the old members and this one have not joined: they hold
    // nothing back.
    Worker absent;
    absent.counted = false;
    workers_.resize(static_cast<size_t>(worker) + 1, absent);
  }
  Worker& w = workers_[worker];
  if (w.counted && !w.done) return false;  // a member already (re-registering)
  w.done = false;
  w.counted = false;
  w.joining = true;
  if (RoundEmpty()) {
    Recount();  // between rounds: it is counted from this one
    return false;
  }
  (void)params;
  return false;
}

bool SyncAggregator::MaybeApply(ShardParams& params) {
  if (accepted_ == 0) return false;
  // The active workers' gradients decide when a step is complete; one a
  // worker delivered before it finished or left counts in the average but
  // stands in for no one.
  int active = 0, in_from_active = 0;
  for (const Worker& w : workers_) {
    if (!w.counted || w.done) continue;
    ++active;
    in_from_active += w.accepted ? 1 : 0;
  }
  if (active > 0 && in_from_active < rule_.GradientsPerUpdate(active)) return false;
  // Sum in worker order so the result never depends on arrival order, and
  // average, a block at a time right before the optimizer reads it: the
  // sum never goes through memory whole.
  std::vector<const float*> slots;
  for (Worker& w : workers_) {
    if (!w.accepted) continue;
    slots.push_back(w.gradient);
    w.accepted = false;
  }
  accepted_ = 0;
  params.ApplyBlocks([&](size_t b, size_t e, float* out) { AverageSlots(slots, b, e - b, out); });
  Recount();  // a round boundary: workers that joined count from the next
  return true;
}

bool SyncAggregator::WorkerDone(ShardParams& params, int worker) {
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return false;
  Worker& w = workers_[worker];
  if (w.done) return false;
  w.done = true;
  w.joining = false;
  // The others may have been waiting only for it.
  if (!pipeline_) return MaybeApply(params);
  // Finished in the middle of a push: its chunks no longer count.
  const bool rolled_back = TakeBack(params, worker);
  const bool advanced = Advance(params);  // the round no longer waits for it
  return rolled_back || advanced;
}

bool SyncAggregator::AddChunk(ShardParams& params, int worker, std::span<const float> gradient) {
  Worker& w = workers_[worker];
  w.gradient = gradient.data();
  ++w.ready;
  if (w.ready == NumChunks(params)) {
    w.accepted = true;
    ++accepted_;
  }
  return Advance(params);
}

bool SyncAggregator::TakeBack(ShardParams& params, int worker) {
  Worker& w = workers_[worker];
  if (w.accepted || w.ready == 0) return false;  // complete (it counts) or nothing taken
  w.ready = 0;
  if (round_.applied == 0) return false;
  RollBack(params);
  return true;
}

bool SyncAggregator::Advance(ShardParams& params) {
  if (!pipeline_ || !params.started()) return false;
  const int64_t num_chunks = NumChunks(params);
  int64_t ready = num_chunks;
  std::vector<const float*> slots;  // in worker order: the sum never depends on arrival
  for (const Worker& w : workers_) {
    // A finished worker no longer holds the round back, but a gradient it
    // delivered whole before finishing counts, as when not pipelined.
    if ((w.done || !w.counted) && !w.accepted) continue;
    ready = std::min(ready, w.ready);
    slots.push_back(w.gradient);
  }
  if (slots.empty() || round_.applied >= ready) return false;
  if (round_.applied == 0) {
    // A buffer no sender holds, never the current parameters: those stay
    // as they are until the round commits, for readers and for a rollback.
    round_.next = params.SpareBuffer();
  }
  const std::vector<std::span<float>>& state = params.optimizer_state();
  if (round_.undo.size() != state.size()) {
    round_.undo.clear();
    for (std::span<float> st : state) round_.undo.emplace_back(st.size());
  }
  const size_t length = params.size();
  const size_t chunk_values = static_cast<size_t>(data_plane::ChunkValues(length));
  const float lr = params.learning_rate();
  const float* cur = params.values().data();
  float* next = round_.next->data();
  const ScopedFlushDenormals flush;
  for (int64_t c = round_.applied; c < ready; ++c) {
    const size_t b = static_cast<size_t>(c) * chunk_values;
    const size_t e = std::min(length, b + chunk_values);
    std::copy(cur + b, cur + e, next + b);
    for (size_t k = 0; k < state.size(); ++k) {
      std::copy(state[k].data() + b, state[k].data() + e, round_.undo[k].data() + b);
    }
    params.optimizer().ApplyPart(
        std::span<float>(next + b, e - b), b,
        [&](size_t pb, size_t pe, float* out) { AverageSlots(slots, b + pb, pe - pb, out); }, lr);
  }
  round_.applied = ready;
  if (ready == num_chunks) Commit(params);
  return true;
}

void SyncAggregator::Commit(ShardParams& params) {
  params.CommitStep(std::move(round_.next));
  for (Worker& w : workers_) {
    w.accepted = false;
    w.ready = 0;
  }
  accepted_ = 0;
  round_.applied = 0;
  committed_attempt_ = round_.attempt++;
  Recount();  // a round boundary: workers that joined count from the next
}

void SyncAggregator::RollBack(ShardParams& params) {
  const std::vector<std::span<float>>& state = params.optimizer_state();
  const size_t n = std::min(
      params.size(), static_cast<size_t>(round_.applied * data_plane::ChunkValues(params.size())));
  for (size_t k = 0; k < state.size() && k < round_.undo.size(); ++k) {
    std::copy(round_.undo[k].data(), round_.undo[k].data() + n, state[k].data());
  }
  round_.applied = 0;
  round_.next.reset();  // senders of it hold their own pins
  ++round_.attempt;
}

void SyncAggregator::SuspendRound(ShardParams& params) {
  if (round_.applied > 0) RollBack(params);
}

std::optional<RoundRead> SyncAggregator::ReadRound(const ShardParams& params, int64_t step,
                                                   uint64_t attempt, int64_t sent,
                                                   bool finished) const {
  RoundRead r;
  if (params.global_step() > step || finished) {
    if (sent > 0 && attempt != committed_attempt_) {
      r.kind = RoundRead::Kind::kRestart;
      return r;
    }
    r.pin = params.Pin();
    r.values = params.values();
    r.ready = NumChunks(params);
    r.attempt = committed_attempt_;
    r.committed = true;
    r.global_step = params.global_step();
    r.finished = finished;
    return r;
  }
  if (sent > 0 && attempt != round_.attempt) {
    r.kind = RoundRead::Kind::kRestart;
    return r;
  }
  if (round_.applied > sent && step == params.global_step()) {
    r.pin = round_.next;
    r.values = round_.next->span();
    r.ready = round_.applied;
    r.attempt = round_.attempt;
    return r;
  }
  return std::nullopt;
}

}  // namespace kubetrain::ps
