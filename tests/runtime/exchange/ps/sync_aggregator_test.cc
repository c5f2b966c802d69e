// SyncAggregator on its own: the sync rule judges each push, as the shard
// does, and the aggregator turns what it accepts into updates of a
// ShardParams.
#include "runtime/exchange/ps/sync_aggregator.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/exchange/ps/sync_rule.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "tests/runtime/exchange/ps/update_policy_test_util.h"

namespace kubetrain::ps {
namespace {

using testing_util::StartedParams;
using testing_util::State;
using testing_util::Values;

// Workers' gradient slots, one value each.
std::vector<std::vector<float>> Slots(size_t n, std::vector<float> values) {
  std::vector<std::vector<float>> out;
  for (float v : values) out.emplace_back(n, v);
  return out;
}

// Judges a push as the shard does, and hands an accepted one over.
PushVerdict::Kind Push(const SyncRule& rule, SyncAggregator& agg, ShardParams& params, int worker,
                       int64_t step, const std::vector<float>& slot) {
  const PushVerdict v = rule.JudgePush(step, 0, params.global_step());
  if (v.kind == PushVerdict::kAccept) agg.Push(params, worker, slot, 0);
  return v.kind;
}

// replicas_to_aggregate 2 of 3 workers: the first two gradients of a step
// make its update, averaged; the third is stale to the rule and never
// counts, whatever its slot holds.
TEST(SyncAggregator, AveragesExactlyReplicasToAggregateGradientsAndDropsStaleOnes) {
  constexpr size_t kN = 8;
  SyncRule rule(3, /*replicas_to_aggregate=*/2);
  SyncAggregator agg(rule, 3, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, /*lr=*/1.0f, /*momentum=*/0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 100.0f, 3.0f});
  EXPECT_FALSE(agg.pipelined());

  ASSERT_EQ(Push(rule, agg, *params, 2, 0, slots[2]), PushVerdict::kAccept);
  EXPECT_TRUE(agg.Holds(2));  // a repeat of it would be a duplicate
  EXPECT_EQ(params->global_step(), 0);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 10.0f));
  ASSERT_EQ(Push(rule, agg, *params, 0, 0, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);
  EXPECT_EQ(params->updates(), 1);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 8.0f));  // 10 - mean(1, 3)
  EXPECT_FALSE(agg.Holds(0));
  EXPECT_FALSE(agg.Holds(2));

  // The backup worker's gradient for step 0 is late: dropped.
  EXPECT_EQ(Push(rule, agg, *params, 1, 0, slots[1]), PushVerdict::kStale);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 8.0f));

  // Step 1: again the first two, whichever they are.
  slots[1].assign(kN, 5.0f);
  ASSERT_EQ(Push(rule, agg, *params, 1, 1, slots[1]), PushVerdict::kAccept);
  ASSERT_EQ(Push(rule, agg, *params, 0, 1, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 2);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 5.0f));  // 8 - mean(5, 1)
}

// Aggregating every worker, a finished one no longer counts towards a
// step: the others' gradients make it.
TEST(SyncAggregator, AFinishedWorkerLowersTheCount) {
  constexpr size_t kN = 4;
  SyncRule rule(3, /*replicas_to_aggregate=*/0);
  SyncAggregator agg(rule, 3, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, 1.0f, 0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 3.0f, 0.0f});
  agg.WorkerDone(*params, 2);
  ASSERT_EQ(Push(rule, agg, *params, 0, 0, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 0);  // waits for worker 1
  ASSERT_EQ(Push(rule, agg, *params, 1, 0, slots[1]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 8.0f));  // 10 - mean(1, 3)
}

// Elastic workers: a worker that joins while a round is under way is
// counted from the next one; each round aggregates exactly the workers
// counted for it.
TEST(SyncAggregator, AWorkerJoiningMidRoundIsCountedFromTheNextRound) {
  constexpr size_t kN = 4;
  SyncRule rule(2, /*replicas_to_aggregate=*/0);
  SyncAggregator agg(rule, 2, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, 1.0f, 0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 3.0f, 8.0f});
  EXPECT_EQ(agg.CountedWorkers(), 2);

  ASSERT_EQ(Push(rule, agg, *params, 0, 0, slots[0]), PushVerdict::kAccept);
  agg.Join(*params, 2);  // round 0 is under way
  EXPECT_FALSE(agg.Counts(2));
  EXPECT_EQ(agg.CountedWorkers(), 2);
  ASSERT_EQ(Push(rule, agg, *params, 1, 0, slots[1]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);                       // round 0: workers 0 and 1 only
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 8.0f));  // 10 - mean(1, 3)

  // Round 1 counts three: two gradients are not enough.
  EXPECT_TRUE(agg.Counts(2));
  EXPECT_EQ(agg.CountedWorkers(), 3);
  ASSERT_EQ(Push(rule, agg, *params, 0, 1, slots[0]), PushVerdict::kAccept);
  ASSERT_EQ(Push(rule, agg, *params, 1, 1, slots[1]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);
  ASSERT_EQ(Push(rule, agg, *params, 2, 1, slots[2]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 2);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 4.0f));  // 8 - mean(1, 3, 8)
}

// Between rounds (nothing of the current one in yet) a join is a round
// boundary: the worker counts at once.
TEST(SyncAggregator, AWorkerJoiningBetweenRoundsCountsAtOnce) {
  constexpr size_t kN = 4;
  SyncRule rule(2, 0);
  SyncAggregator agg(rule, 2, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, 1.0f, 0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 3.0f, 8.0f});
  agg.Join(*params, 2);
  EXPECT_TRUE(agg.Counts(2));
  EXPECT_EQ(agg.CountedWorkers(), 3);
  for (int w = 0; w < 2; ++w)
    ASSERT_EQ(Push(rule, agg, *params, w, 0, slots[w]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 0);
  ASSERT_EQ(Push(rule, agg, *params, 2, 0, slots[2]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);
}

// A worker that leaves is not waited for: a round the others had already
// completed but for it goes through at once, and the next counts two. A
// whole gradient it delivered before leaving still counts. It may join
// again, counted from the next round boundary.
TEST(SyncAggregator, ALeavingWorkerIsNotWaitedForAndMayJoinAgain) {
  constexpr size_t kN = 4;
  SyncRule rule(3, 0);
  SyncAggregator agg(rule, 3, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, 1.0f, 0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 3.0f, 8.0f});
  ASSERT_EQ(Push(rule, agg, *params, 0, 0, slots[0]), PushVerdict::kAccept);
  ASSERT_EQ(Push(rule, agg, *params, 1, 0, slots[1]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 0);
  EXPECT_TRUE(agg.WorkerDone(*params, 2));  // leaves: round 0 is complete without it
  EXPECT_EQ(params->global_step(), 1);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 8.0f));
  EXPECT_FALSE(agg.Counts(2));
  EXPECT_EQ(agg.CountedWorkers(), 2);

  // Worker 1 pushes round 1, then leaves: its gradient counts.
  ASSERT_EQ(Push(rule, agg, *params, 1, 1, slots[1]), PushVerdict::kAccept);
  EXPECT_FALSE(agg.WorkerDone(*params, 1));  // worker 0 is still to come
  EXPECT_EQ(agg.CountedWorkers(), 1);
  ASSERT_EQ(Push(rule, agg, *params, 0, 1, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 2);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 6.0f));  // 8 - mean(1, 3)

  // Worker 2 comes back between rounds: counted at once.
  agg.Join(*params, 2);
  EXPECT_TRUE(agg.Counts(2));
  EXPECT_EQ(agg.CountedWorkers(), 2);
  ASSERT_EQ(Push(rule, agg, *params, 0, 2, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 2);
  ASSERT_EQ(Push(rule, agg, *params, 2, 2, slots[2]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 3);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 1.5f));  // 6 - mean(1, 8)
}

// Backup workers keep their meaning as the count changes: replicas_to_aggregate
// of the counted workers make a step (all of them when fewer are active).
TEST(SyncAggregator, BackupWorkersKeepTheirMeaningAsWorkersJoinAndLeave) {
  constexpr size_t kN = 4;
  SyncRule rule(2, /*replicas_to_aggregate=*/2);
  SyncAggregator agg(rule, 2, /*pipeline=*/false);
  std::unique_ptr<ShardParams> params = StartedParams(kN, 10.0f, 1.0f, 0);
  std::vector<std::vector<float>> slots = Slots(kN, {1.0f, 3.0f, 5.0f});
  agg.Join(*params, 2);  // 3 workers, 2 per step: one backup
  EXPECT_EQ(agg.CountedWorkers(), 3);
  ASSERT_EQ(Push(rule, agg, *params, 2, 0, slots[2]), PushVerdict::kAccept);
  ASSERT_EQ(Push(rule, agg, *params, 0, 0, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 1);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 7.0f));  // 10 - mean(5, 1)
  EXPECT_EQ(Push(rule, agg, *params, 1, 0, slots[1]), PushVerdict::kStale);
  // Two leave: the one left makes each step alone.
  agg.WorkerDone(*params, 2);
  agg.WorkerDone(*params, 1);
  ASSERT_EQ(Push(rule, agg, *params, 0, 1, slots[0]), PushVerdict::kAccept);
  EXPECT_EQ(params->global_step(), 2);
  EXPECT_EQ(Values(*params), std::vector<float>(kN, 6.0f));
}

// Pipelined rounds: two workers' gradients over a range of three chunks,
// sgd with momentum so each chunk also changes optimizer state.
class SyncAggregatorRounds : public ::testing::Test {
 protected:
  static constexpr size_t kN = 2 * data_plane::kMinChunkValues + 1000;  // 3 chunks

  SyncAggregatorRounds() : rule_(2, 0) {}

  static std::vector<float> Grad(int worker, int64_t step) {
    std::vector<float> g(kN);
    for (size_t i = 0; i < kN; ++i) {
      g[i] =
          static_cast<float>((static_cast<int64_t>(i) * (worker + 2) + step) % 17) * 0.01f - 0.05f;
    }
    return g;
  }
  std::unique_ptr<ShardParams> Params() { return StartedParams(kN, 0.5f, 0.25f, 0.9f); }

  SyncRule rule_;
};

// A round that applied chunks and is then broken off (a lost connection, a
// corrupt chunk) leaves the parameters and the optimizer state as they were
// before it; its senders are told to start again; delivered again, the
// round gives the bits of a whole step.
TEST_F(SyncAggregatorRounds, ARoundRolledBackOnAbortLeavesTheParametersUnchanged) {
  ASSERT_EQ(data_plane::NumChunks(kN), 3);
  SyncAggregator piped(rule_, 2, /*pipeline=*/true);
  SyncAggregator plain(rule_, 2, /*pipeline=*/false);
  ASSERT_TRUE(piped.pipelined());
  std::unique_ptr<ShardParams> p = Params();
  std::unique_ptr<ShardParams> q = Params();
  // Step 0 whole on both, so the optimizer state is not all zero.
  const std::vector<float> g00 = Grad(0, 0), g10 = Grad(1, 0);
  piped.Push(*p, 0, g00, 0);
  piped.Push(*p, 1, g10, 0);
  plain.Push(*q, 0, g00, 0);
  plain.Push(*q, 1, g10, 0);
  ASSERT_EQ(p->global_step(), 1);
  ASSERT_EQ(Values(*p), Values(*q));
  const std::vector<float> params_before = Values(*p);
  const std::vector<float> state_before = State(*p);

  // Step 1: chunk 0 of each worker is applied into the round's buffer.
  const std::vector<float> g01 = Grad(0, 1), g11 = Grad(1, 1);
  piped.AddChunk(*p, 0, g01);
  piped.AddChunk(*p, 1, g11);
  std::optional<RoundRead> mid = piped.ReadRound(*p, 1, 0, 0, false);
  ASSERT_TRUE(mid.has_value());
  EXPECT_EQ(mid->kind, RoundRead::Kind::kChunks);
  EXPECT_EQ(mid->ready, 1);
  EXPECT_FALSE(mid->committed);
  EXPECT_NE(mid->values[0], params_before[0]);
  EXPECT_EQ(Values(*p), params_before);  // the parameters wait for the commit
  EXPECT_NE(State(*p), state_before);    // chunk 0's state moved

  // Worker 1's push breaks off.
  EXPECT_TRUE(piped.TakeBack(*p, 1));
  EXPECT_EQ(Values(*p), params_before);
  EXPECT_EQ(State(*p), state_before);
  EXPECT_EQ(p->global_step(), 1);
  EXPECT_EQ(piped.ChunksIn(1), 0);
  EXPECT_EQ(piped.ChunksIn(0), 1);  // worker 0's chunk still counts
  std::optional<RoundRead> restart = piped.ReadRound(*p, 1, mid->attempt, 1, false);
  ASSERT_TRUE(restart.has_value());
  EXPECT_EQ(restart->kind, RoundRead::Kind::kRestart);
  EXPECT_FALSE(piped.TakeBack(*p, 1));  // nothing left to take back

  // Delivered again, all of it: the round commits with a whole step's bits.
  for (int c = 0; c < 3; ++c) piped.AddChunk(*p, 1, g11);
  for (int c = 1; c < 3; ++c) piped.AddChunk(*p, 0, g01);
  plain.Push(*q, 0, g01, 1);
  plain.Push(*q, 1, g11, 1);
  EXPECT_EQ(p->global_step(), 2);
  EXPECT_EQ(p->optimizer().steps(), 2);
  EXPECT_EQ(Values(*p), Values(*q));
  EXPECT_EQ(State(*p), State(*q));
  std::optional<RoundRead> done = piped.ReadRound(*p, 1, 0, 0, false);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->committed);
  EXPECT_EQ(done->global_step, 2);
}

// Pipelined: a worker joining while a round has chunks in does not hold
// that round (it commits with the counted workers' chunks); the next round
// waits for its chunks too, and gives a whole step's bits over three.
TEST_F(SyncAggregatorRounds, AWorkerJoiningMidRoundHoldsOnlyTheNextRound) {
  SyncRule rule3(3, 0);
  SyncAggregator piped(rule_, 2, /*pipeline=*/true);
  SyncAggregator plain(rule3, 3, /*pipeline=*/false);
  std::unique_ptr<ShardParams> p = Params();
  std::unique_ptr<ShardParams> q = Params();
  const std::vector<float> g00 = Grad(0, 0), g10 = Grad(1, 0);
  piped.AddChunk(*p, 0, g00);
  piped.Join(*p, 2);
  EXPECT_FALSE(piped.Counts(2));
  for (int c = 0; c < 3; ++c) piped.AddChunk(*p, 1, g10);
  for (int c = 1; c < 3; ++c) piped.AddChunk(*p, 0, g00);
  ASSERT_EQ(p->global_step(), 1);  // committed without worker 2
  // The same first step on a plain aggregator of the two.
  SyncAggregator plain2(rule_, 2, /*pipeline=*/false);
  plain2.Push(*q, 0, g00, 0);
  plain2.Push(*q, 1, g10, 0);
  ASSERT_EQ(Values(*p), Values(*q));

  // Round 1 counts three.
  EXPECT_TRUE(piped.Counts(2));
  const std::vector<float> g01 = Grad(0, 1), g11 = Grad(1, 1), g21 = Grad(2, 1);
  for (int c = 0; c < 3; ++c) {
    piped.AddChunk(*p, 0, g01);
    piped.AddChunk(*p, 1, g11);
  }
  EXPECT_EQ(p->global_step(), 1);
  EXPECT_FALSE(piped.ReadRound(*p, 1, 0, 0, false).has_value());  // waits for worker 2
  for (int c = 0; c < 3; ++c) piped.AddChunk(*p, 2, g21);
  EXPECT_EQ(p->global_step(), 2);
  // Whole-step bits: the three gradients averaged in worker order.
  plain.Join(*q, 0);  // no-op: already counted
  plain.Push(*q, 0, g01, 1);
  plain.Push(*q, 1, g11, 1);
  plain.Push(*q, 2, g21, 1);
  EXPECT_EQ(Values(*p), Values(*q));
  EXPECT_EQ(State(*p), State(*q));
}

// A checkpoint holds whole steps: SuspendRound takes a partly applied
// round back, ResumeRound applies it again.
TEST_F(SyncAggregatorRounds, ARoundSuspendedForACheckpointIsAppliedAgain) {
  SyncAggregator piped(rule_, 2, /*pipeline=*/true);
  std::unique_ptr<ShardParams> p = Params();
  const std::vector<float> params_before = Values(*p);
  const std::vector<float> state_before = State(*p);
  const std::vector<float> g0 = Grad(0, 0), g1 = Grad(1, 0);
  for (int c = 0; c < 2; ++c) {
    piped.AddChunk(*p, 0, g0);
    piped.AddChunk(*p, 1, g1);
  }
  ASSERT_EQ(piped.ReadRound(*p, 0, 0, 0, false)->ready, 2);
  piped.SuspendRound(*p);
  EXPECT_EQ(Values(*p), params_before);
  EXPECT_EQ(State(*p), state_before);
  EXPECT_FALSE(piped.ReadRound(*p, 0, 0, 0, false).has_value());  // nothing applied
  piped.ResumeRound(*p);
  EXPECT_EQ(piped.ReadRound(*p, 0, 0, 0, false)->ready, 2);
}

}  // namespace
}  // namespace kubetrain::ps
