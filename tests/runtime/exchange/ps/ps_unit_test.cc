// Unit tests of the parameter server's pieces without the network: shard
// ranges, the fp16 wire codec, checkpoint files, and the shard's rules.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/exchange/ps/wire_values.h"
#include "runtime/tensor/denormals.h"
#include "tests/support/denormal_mode.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensor_chunk_codec.h"
#include "tests/support/wait_for.h"

namespace kubetrain::ps {
namespace {

using data::testing_util::TempDir;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(ShardRange, ContiguousAlignedAndCovering) {
  for (int64_t n : {1, 15, 16, 17, 1000, 235146}) {
    for (int shards : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int i = 0; i < shards; ++i) {
        Range r = ShardRange(n, shards, i);
        EXPECT_EQ(r.offset, next) << n << " " << shards << " " << i;
        if (r.offset < n) {
          EXPECT_EQ(r.offset % 16, 0);
        }
        next = r.end();
      }
      EXPECT_EQ(next, n);
    }
  }
  // Near-equal: 64 blocks of 16 over 4 shards.
  EXPECT_EQ(ShardRange(1024, 4, 3), (Range{768, 256}));
}

TEST(WireCodec, HalfRoundTripErrorIsBounded) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int e = -14; e <= 15; ++e) {
    for (int k = 0; k < 200; ++k) {
      const float x = std::ldexp(mant(rng), e) * (k % 2 ? -1.0f : 1.0f);
      const float y = HalfToFloat(FloatToHalf(x));
      EXPECT_LE(std::abs(y - x), std::abs(x) * 0x1.0p-11f) << x;
    }
  }
  EXPECT_EQ(HalfToFloat(FloatToHalf(0.0f)), 0.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  // Subnormal halves keep absolute error below half their spacing (2^-25).
  EXPECT_NEAR(HalfToFloat(FloatToHalf(3e-6f)), 3e-6f, 0x1.0p-25f);
}

TEST(WireCodec, ChunksCarryChecksumsAndSizes) {
  std::vector<float> v = {1, 2, 3, 4.5f}, out(4);
  v1::TensorChunk c;
  EncodeChunk(v, 32, v1::WIRE_DTYPE_F32, &c);
  ASSERT_TRUE(DecodeChunk(c, out).ok());
  EXPECT_EQ(out, v);
  EncodeChunk(v, 32, v1::WIRE_DTYPE_F16, &c);
  EXPECT_EQ(c.data().size(), 8u);
  ASSERT_TRUE(DecodeChunk(c, out).ok());
  EXPECT_EQ(out, v);  // exactly representable in fp16
  c.mutable_data()->at(3) ^= 0x10;
  EXPECT_EQ(DecodeChunk(c, out).code(), absl::StatusCode::kDataLoss);
  std::vector<float> small(3);
  EncodeChunk(v, 32, v1::WIRE_DTYPE_F32, &c);
  EXPECT_THAT(Msg(DecodeChunk(c, small)), HasSubstr("has 16 bytes, expected 12"));
}

exchange::CheckpointView View(int64_t step, const std::vector<float>& p,
                              const std::vector<float>& m) {
  exchange::CheckpointView v;
  v.header.set_shard_index(0);
  v.header.set_num_shards(1);
  v.header.mutable_range()->set_length(p.size());
  v.header.set_num_params(p.size());
  v.header.set_global_step(step);
  v.header.set_optimizer("sgd");
  v.header.add_state_names("velocity");
  v.params = p;
  v.states.push_back(m);
  return v;
}

TEST(Checkpoint, RoundTripsAndKeepsTheNewestK) {
  TempDir dir;
  std::vector<float> p = {1, 2, 3}, m = {0.5f, 0.25f, 0};
  for (int step : {10, 20, 30, 40}) {
    absl::StatusOr<std::string> path = exchange::WriteCheckpoint(dir.path(), View(step, p, m), 2);
    ASSERT_TRUE(path.ok()) << path.status();
  }
  std::vector<std::string> warnings;
  absl::StatusOr<exchange::CheckpointData> d = exchange::LoadLatestCheckpoint(
      dir.path(), 0, 1, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.global_step(), 40);
  EXPECT_EQ(d->params, p);
  EXPECT_EQ(d->states.at(0), m);
  EXPECT_TRUE(warnings.empty());
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(exchange::ShardCheckpointDir(dir.path(), 0, 1))) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(Checkpoint, CorruptAndTruncatedFilesAreSkippedWithAWarning) {
  TempDir dir;
  std::vector<float> p = {1, 2, 3}, m = {0, 0, 0};
  ASSERT_TRUE(exchange::WriteCheckpoint(dir.path(), View(10, p, m), 5).ok());
  absl::StatusOr<std::string> p20 = exchange::WriteCheckpoint(dir.path(), View(20, p, m), 5);
  absl::StatusOr<std::string> p30 = exchange::WriteCheckpoint(dir.path(), View(30, p, m), 5);
  ASSERT_TRUE(p20.ok() && p30.ok());
  std::filesystem::resize_file(*p30, std::filesystem::file_size(*p30) - 5);  // truncated
  {
    std::fstream f(*p20, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');  // a flipped byte
  }
  std::vector<std::string> warnings;
  absl::StatusOr<exchange::CheckpointData> d = exchange::LoadLatestCheckpoint(
      dir.path(), 0, 1, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->header.global_step(), 10);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("truncated"));
  EXPECT_THAT(warnings[1], HasSubstr("ckpt-000000000020.ktc"));
  EXPECT_EQ(exchange::LoadLatestCheckpoint(dir.path() + "/none", 0, 1, [](const std::string&) {})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// A shard over 32 parameters with plain SGD (lr 1) so updates are easy to check.
struct ShardFixture {
  explicit ShardFixture(const std::string& mode, int workers = 2, int aggregate = 0,
                        std::string ckpt_dir = "") {
    PsShardOptions o;
    o.num_workers = workers;
    o.mode = *ExchangeMode::Parse(mode);
    o.replicas_to_aggregate = aggregate;
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = 0;
    o.lr.base_lr = 1.0f;
    o.checkpoint_dir = std::move(ckpt_dir);
    o.incarnation = 7;
    shard = std::make_unique<PsShard>(o, clock, [this](const std::string& m) { log.push_back(m); });
    for (int w = 0; w < workers; ++w) EXPECT_TRUE(shard->Register(w, 32, "").ok());
  }
  absl::Status Init(float value) {
    absl::StatusOr<std::span<float>> s = shard->BeginStaging(0, 0, true);
    if (!s.ok()) return s.status();
    std::fill(s->begin(), s->end(), value);
    absl::StatusOr<bool> r = shard->CommitInitialize(0, 0, 100);
    shard->EndStaging(0);
    return r.status();
  }
  absl::StatusOr<PushResult> Push(int w, int64_t step, float g) {
    absl::StatusOr<std::span<float>> s = shard->BeginStaging(w, step, false);
    if (!s.ok()) return s.status();
    std::fill(s->begin(), s->end(), g);
    absl::StatusOr<PushResult> r = shard->CommitPush(w, step);
    shard->EndStaging(w);
    return r;
  }
  float Param(int w = 0) {
    std::vector<float> out(32);
    absl::StatusOr<PullResult> r = shard->Pull(w, 0, 0, out, nullptr);
    EXPECT_TRUE(r.ok());
    return out[5];
  }
  FakeClock clock;
  std::vector<std::string> log;
  std::unique_ptr<PsShard> shard;
};

TEST(PsShard, SyncAveragesOneGradientPerWorkerPerStep) {
  ShardFixture f("sync");
  ASSERT_TRUE(f.Init(10).ok());
  absl::StatusOr<PushResult> a = f.Push(0, 0, 1.0f);
  ASSERT_TRUE(a.ok() && a->accepted);
  EXPECT_EQ(a->global_step, 0);  // waits for worker 1
  EXPECT_FLOAT_EQ(f.Param(), 10.0f);
  absl::StatusOr<PushResult> b = f.Push(1, 0, 3.0f);
  ASSERT_TRUE(b.ok() && b->accepted);
  EXPECT_EQ(b->global_step, 1);
  EXPECT_FLOAT_EQ(f.Param(), 8.0f);  // 10 - mean(1, 3)
}

// The optimizer runs on whatever thread delivers a push (gRPC's, the data
// plane's): it flushes subnormal values there, and leaves the thread's own
// mode as it was. Plain SGD, lr 1: keeping the subnormal gradient would
// leave a subnormal parameter.
TEST(PsShard, UpdatesFlushSubnormalsOnTheCallersThread) {
  if (!kubetrain::testing::kHasDenormalControl) GTEST_SKIP() << "no MXCSR on this CPU";
  ShardFixture f("async", 1);
  ASSERT_TRUE(f.Init(0).ok());
  kubetrain::testing::ScopedKeepDenormals keep;
  ASSERT_TRUE(f.Push(0, 0, kubetrain::testing::Subnormal()).ok());
  EXPECT_EQ(f.Param(), 0.0f);
  EXPECT_FALSE(DenormalsFlushedInThisThread());
}

TEST(PsShard, SyncBackupWorkersDropLateGradients) {
  ShardFixture f("sync", 2, /*aggregate=*/1);
  ASSERT_TRUE(f.Init(10).ok());
  ASSERT_EQ(f.Push(0, 0, 1.0f)->global_step, 1);  // first of 2 suffices
  absl::StatusOr<PushResult> late = f.Push(1, 0, 100.0f);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->accepted);
  EXPECT_FLOAT_EQ(f.Param(), 9.0f);
  EXPECT_EQ(f.shard->Status().stale_pushes(), 1);
}

TEST(PsShard, SyncPullWaitsAtTheBarrier) {
  ShardFixture f("sync");
  ASSERT_TRUE(f.Init(10).ok());
  ASSERT_TRUE(f.Push(0, 0, 1.0f).ok());
  std::atomic<bool> released{false};
  std::thread puller([&] {
    std::vector<float> out(32);
    absl::StatusOr<PullResult> r = f.shard->Pull(0, /*min_step=*/1, 0, out, nullptr);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->global_step, 1);
    released = true;
  });
  EXPECT_FALSE(released.load());
  ASSERT_TRUE(f.Push(1, 0, 1.0f).ok());
  puller.join();
  EXPECT_TRUE(released.load());
}

TEST(PsShard, AsyncAppliesEachGradientAsItArrives) {
  ShardFixture f("async");
  ASSERT_TRUE(f.Init(10).ok());
  EXPECT_EQ(f.Push(1, 0, 1.0f)->global_step, 1);
  EXPECT_EQ(f.Push(1, 1, 1.0f)->global_step, 2);
  EXPECT_EQ(f.Push(0, 0, 2.0f)->global_step, 3);
  EXPECT_FLOAT_EQ(f.Param(), 6.0f);
  // A worker's clock is its own: worker 0 pushing step 5 is from the future.
  absl::StatusOr<PushResult> future = f.Push(0, 5, 1.0f);
  EXPECT_THAT(Msg(future.status()), HasSubstr("is from the future: its clock is 1"));
}

// A reader that keeps the pin of what Read() showed it (the data plane's
// sender) keeps those parameters: an update meanwhile moves the shard to a
// copy. Once the pin is dropped, updates write in place again.
TEST(PsShard, PinnedParametersStayAsReadWhileUpdatesGoOn) {
  ShardFixture f("async");
  ASSERT_TRUE(f.Init(10).ok());
  PullResult pinned;
  std::span<const float> seen;
  ASSERT_TRUE(f.shard
                  ->Read(
                      0, 0, 0,
                      [&](std::span<const float> params, const PullResult& r) {
                        pinned = r;
                        seen = params;
                      },
                      nullptr)
                  .ok());
  ASSERT_NE(pinned.pin, nullptr);
  ASSERT_EQ(seen.size(), 32u);
  ASSERT_TRUE(f.Push(1, 0, 1.0f).ok());  // an update while pinned
  ASSERT_TRUE(f.Push(1, 1, 1.0f).ok());  // and one more
  EXPECT_FLOAT_EQ(f.Param(), 8.0f);
  for (float v : seen) ASSERT_FLOAT_EQ(v, 10.0f);  // untouched
  // The result Read() returns holds no pin.
  absl::StatusOr<PullResult> plain = f.shard->Read(
      0, 0, 0, [](std::span<const float>, const PullResult&) {}, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->pin, nullptr);
  EXPECT_GT(plain->version, pinned.version);
  // Unpinned, the next reader sees the buffer updates write in place.
  pinned = PullResult();
  std::span<const float> before, after;
  auto look = [&](std::span<const float>* where) {
    ASSERT_TRUE(f.shard
                    ->Read(
                        0, 0, 0,
                        [&](std::span<const float> params, const PullResult&) { *where = params; },
                        nullptr)
                    .ok());
  };
  look(&before);
  ASSERT_TRUE(f.Push(1, 2, 1.0f).ok());
  look(&after);
  EXPECT_EQ(before.data(), after.data());
  EXPECT_FLOAT_EQ(after[5], 7.0f);
}

TEST(PsShard, SspBlocksAWorkerTooFarAheadUntilTheSlowestCatchesUp) {
  ShardFixture f("ssp:1");
  ASSERT_TRUE(f.Init(10).ok());
  ASSERT_TRUE(f.Push(0, 0, 0.0f).ok());
  ASSERT_TRUE(f.Push(0, 1, 0.0f).ok());  // worker 0 at clock 2, worker 1 at 0
  std::atomic<bool> released{false};
  std::thread puller([&] {
    std::vector<float> out(32);
    EXPECT_TRUE(f.shard->Pull(0, 0, /*clock=*/2, out, nullptr).ok());
    released = true;
  });
  EXPECT_FALSE(released.load());
  ASSERT_TRUE(f.Push(1, 0, 0.0f).ok());  // slowest now at 1: lead 1 <= bound
  puller.join();
  EXPECT_LE(f.shard->Status().max_ssp_lead(), 1);
}

TEST(PsShard, BadPushesAreRejectedCountedAndLeaveParametersUntouched) {
  ShardFixture f("sync");
  ASSERT_TRUE(f.Init(10).ok());
  absl::StatusOr<PushResult> nan = f.Push(0, 0, std::nanf(""));
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(nan.status()), HasSubstr("32 NaN/Inf values"));
  absl::StatusOr<PushResult> inf = f.Push(0, 0, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(inf.ok());
  absl::StatusOr<PushResult> future = f.Push(1, 3, 1.0f);
  EXPECT_THAT(Msg(future.status()), HasSubstr("is from the future: global step is 0"));
  EXPECT_THAT(Msg(f.Push(9, 0, 1.0f).status()), HasSubstr("unknown worker id 9"));
  EXPECT_THAT(Msg(f.shard->Register(0, 33, "").status()),
              HasSubstr("worker's model has 33 parameters but this job's has 32"));
  EXPECT_FLOAT_EQ(f.Param(), 10.0f);
  EXPECT_EQ(f.shard->Status().rejected_pushes(), 3);
  // Still serving: a good step goes through.
  ASSERT_TRUE(f.Push(0, 0, 2.0f).ok());
  ASSERT_TRUE(f.Push(1, 0, 2.0f).ok());
  EXPECT_FLOAT_EQ(f.Param(), 8.0f);
}

TEST(PsShard, RestoresItsCheckpoint) {
  TempDir dir;
  {
    ShardFixture f("sync", 2, 0, dir.path());
    ASSERT_TRUE(f.Init(10).ok());
    ASSERT_TRUE(f.Push(0, 0, 1.0f).ok());
    ASSERT_TRUE(f.Push(1, 0, 1.0f).ok());
    ASSERT_TRUE(f.shard->WriteCheckpointNow().ok());
    ASSERT_TRUE(f.Push(0, 1, 1.0f).ok());
    ASSERT_TRUE(f.Push(1, 1, 1.0f).ok());  // step 2, not checkpointed
  }
  ShardFixture g("sync", 2, 0, dir.path());
  // Registration above happened before restore; restore fixes the layout.
  absl::StatusOr<int64_t> step = g.shard->RestoreFromCheckpoint();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);
  EXPECT_FLOAT_EQ(g.Param(), 9.0f);
  EXPECT_EQ(g.shard->Status().restored_step(), 1);
}

TEST(PsShard, SilentWorkersAreNamed) {
  ShardFixture f("sync");
  f.clock.AdvanceSeconds(5);
  ASSERT_TRUE(f.shard->Register(0, 32, "worker-0").ok());
  f.clock.AdvanceSeconds(6);
  std::vector<std::string> silent = f.shard->SilentWorkers(10);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0], "worker 1");
  f.shard->Done(1);
  EXPECT_TRUE(f.shard->SilentWorkers(10).empty());
}

// Elastic workers on the shard: a worker the cluster spec did not list
// registers (joins) and is counted from the next round boundary; one that
// leaves is no longer waited for, never counts as silent, and the job
// finishes when the others do. Ids at or beyond max_workers are refused.
TEST(PsShard, SyncWorkersJoinAndLeaveAtRoundBoundaries) {
  ShardFixture f("sync");
  ASSERT_TRUE(f.Init(10).ok());
  ASSERT_TRUE(f.Push(0, 0, 1.0f)->accepted);
  // Worker 2 joins while round 0 is under way: its push for it is dropped.
  absl::StatusOr<RegisterInfo> joined = f.shard->Register(2, 32, "worker-2");
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->global_step, 0);
  EXPECT_EQ(joined->workers_counted, 2);
  absl::StatusOr<PushResult> early = f.Push(2, 0, 100.0f);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->accepted);
  ASSERT_TRUE(f.Push(1, 0, 3.0f)->accepted);
  EXPECT_FLOAT_EQ(f.Param(), 8.0f);  // 10 - mean(1, 3)
  EXPECT_EQ(f.shard->Status().workers_counted(), 3);
  bool logged = false;
  for (const std::string& l : f.log) {
    logged =
        logged || l.find("worker-2 joined at step 0; counted from step 1") != std::string::npos;
  }
  EXPECT_TRUE(logged);
  // Round 1 waits for all three.
  ASSERT_TRUE(f.Push(0, 1, 1.0f)->accepted);
  ASSERT_TRUE(f.Push(1, 1, 3.0f)->accepted);
  EXPECT_EQ(f.shard->global_step(), 1);
  ASSERT_TRUE(f.Push(2, 1, 8.0f)->accepted);
  EXPECT_FLOAT_EQ(f.Param(), 4.0f);  // 8 - mean(1, 3, 8)

  // Worker 1 leaves mid-round 2 without pushing: the round goes on without it.
  ASSERT_TRUE(f.Push(0, 2, 1.0f)->accepted);
  ASSERT_TRUE(f.Push(2, 2, 3.0f)->accepted);
  EXPECT_EQ(f.shard->global_step(), 2);
  EXPECT_FALSE(f.shard->Leave(1, "scaled down"));
  EXPECT_EQ(f.shard->global_step(), 3);
  EXPECT_FLOAT_EQ(f.Param(), 2.0f);  // 4 - mean(1, 3)
  EXPECT_EQ(f.shard->Status().workers_left(), 1);
  f.clock.AdvanceSeconds(100);
  ASSERT_TRUE(f.shard->Register(0, 32, "").ok());
  ASSERT_TRUE(f.shard->Register(2, 32, "").ok());
  EXPECT_TRUE(f.shard->SilentWorkers(10).empty());  // the leaver is no lost peer
  EXPECT_FALSE(f.shard->Done(0));
  EXPECT_TRUE(f.shard->Done(2));  // every member finished or left

  EXPECT_THAT(Msg(f.shard->Register(1024, 32, "").status()), HasSubstr("unknown worker id 1024"));
}

// A shard's checkpoint keeps who had left: restarted from it, the shard
// does not wait for that worker again.
TEST(PsShard, ACheckpointKeepsWhoLeft) {
  TempDir dir;
  {
    ShardFixture f("sync", 3, 0, dir.path());
    ASSERT_TRUE(f.Init(10).ok());
    f.shard->Leave(2, "scaled down");
    ASSERT_TRUE(f.Push(0, 0, 1.0f)->accepted);
    ASSERT_TRUE(f.Push(1, 0, 3.0f)->accepted);
    ASSERT_EQ(f.shard->global_step(), 1);
    ASSERT_TRUE(f.shard->WriteCheckpointNow().ok());
  }
  ShardFixture g("sync", 3, 0, dir.path());
  ASSERT_TRUE(g.shard->RestoreFromCheckpoint().ok());
  EXPECT_EQ(g.shard->Status().workers_left(), 1);
  EXPECT_EQ(g.shard->Status().workers_counted(), 2);
  ASSERT_TRUE(g.Push(0, 1, 1.0f)->accepted);
  ASSERT_TRUE(g.Push(1, 1, 3.0f)->accepted);
  EXPECT_EQ(g.shard->global_step(), 2);  // not waiting for worker 2
  EXPECT_FLOAT_EQ(g.Param(), 6.0f);      // 10 - 2 - 2
}

// async/ssp: a worker that joins starts level with the slowest member, so
// the ssp bound holds no one back for it.
TEST(PsShard, AnSspWorkerJoiningStartsAtTheSlowestMembersClock) {
  ShardFixture f("ssp:1");
  ASSERT_TRUE(f.Init(10).ok());
  for (int64_t c = 0; c < 3; ++c) {
    ASSERT_TRUE(f.Push(0, c, 0.0f)->accepted);
    ASSERT_TRUE(f.Push(1, c, 0.0f)->accepted);
  }
  absl::StatusOr<RegisterInfo> joined = f.shard->Register(2, 32, "worker-2");
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->worker_clock, 3);
  // Worker 0 at clock 4 may pull: the slowest (workers 1 and 2) are at 3.
  ASSERT_TRUE(f.Push(0, 3, 0.0f)->accepted);
  std::vector<float> out(32);
  EXPECT_TRUE(f.shard->Pull(0, 0, 4, out, testing_util::GiveUpAfter()).ok());
  ASSERT_TRUE(f.Push(2, 3, 0.0f)->accepted);
}

}  // namespace
}  // namespace kubetrain::ps

namespace kubetrain::ps {
namespace {

TEST(PsShard, CheckpointsEveryTSecondsAsWellAsEveryNSteps) {
  TempDir dir;
  PsShardOptions o;
  o.num_workers = 1;
  o.optimizer.momentum = 0;
  o.checkpoint_dir = dir.path();
  o.checkpoint_every_steps = 1000;  // never by steps here
  o.checkpoint_every_seconds = 30;
  FakeClock clock;
  PsShard shard(o, clock, [](const std::string&) {});
  ASSERT_TRUE(shard.Register(0, 16, "").ok());
  ASSERT_TRUE(shard.BeginStaging(0, 0, true).ok());
  ASSERT_TRUE(shard.CommitInitialize(0, 0, 100).ok());
  shard.EndStaging(0);
  auto push = [&](int64_t step) {
    ASSERT_TRUE(shard.BeginStaging(0, step, false).ok());
    ASSERT_TRUE(shard.CommitPush(0, step).ok());
    shard.EndStaging(0);
  };
  const std::string shard_dir = exchange::ShardCheckpointDir(dir.path(), 0, 1);
  push(0);
  EXPECT_FALSE(std::filesystem::exists(shard_dir));
  clock.AdvanceSeconds(31);
  push(1);
  EXPECT_TRUE(std::filesystem::exists(shard_dir + "/ckpt-000000000002.ktc"));
  push(2);
  EXPECT_FALSE(std::filesystem::exists(shard_dir + "/ckpt-000000000003.ktc"));
}

// checkpoint_policy.h's rule on the shard: a periodic checkpoint that
// cannot be written (the directory lies under a regular file) is logged and
// the push that made it due still succeeds; a requested one returns the
// error.
TEST(PsShard, AFailedPeriodicCheckpointIsLoggedAndARequestedOneFails) {
  TempDir dir;
  const std::string file = dir.path() + "/not-a-directory";
  { std::ofstream(file) << "x"; }
  PsShardOptions o;
  o.num_workers = 1;
  o.checkpoint_dir = file + "/ckpt";
  o.checkpoint_every_steps = 1;
  FakeClock clock;
  std::vector<std::string> log;
  PsShard shard(o, clock, [&log](const std::string& m) { log.push_back(m); });
  ASSERT_TRUE(shard.Register(0, 16, "").ok());
  ASSERT_TRUE(shard.BeginStaging(0, 0, true).ok());
  ASSERT_TRUE(shard.CommitInitialize(0, 0, 100).ok());
  shard.EndStaging(0);
  for (int64_t step = 0; step < 2; ++step) {  // training goes on
    ASSERT_TRUE(shard.BeginStaging(0, step, false).ok());
    absl::StatusOr<PushResult> r = shard.CommitPush(0, step);
    shard.EndStaging(0);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted);
    EXPECT_EQ(r->global_step, step + 1);
  }
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("checkpoint at step 1 failed")));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("checkpoint at step 2 failed")));
  absl::StatusOr<std::string> now = shard.WriteCheckpointNow();
  EXPECT_FALSE(now.ok());
  EXPECT_THAT(Msg(now.status()), HasSubstr("not-a-directory"));
}

// The stopping PS's requested checkpoint (SIGTERM) says which step it holds:
// what its log line and termination message report.
TEST(PsShard, ARequestedCheckpointSaysItsStep) {
  TempDir dir;
  PsShardOptions o;
  o.num_workers = 1;
  o.checkpoint_dir = dir.path();
  o.checkpoint_every_steps = 1000;
  FakeClock clock;
  PsShard shard(o, clock, [](const std::string&) {});
  ASSERT_TRUE(shard.Register(0, 16, "").ok());
  ASSERT_TRUE(shard.BeginStaging(0, 0, true).ok());
  ASSERT_TRUE(shard.CommitInitialize(0, 0, 100).ok());
  shard.EndStaging(0);
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(shard.BeginStaging(0, step, false).ok());
    ASSERT_TRUE(shard.CommitPush(0, step).ok());
    shard.EndStaging(0);
  }
  int64_t step = -1;
  absl::StatusOr<std::string> path = shard.WriteCheckpointNow(&step);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(step, 3);
  EXPECT_EQ(*path, exchange::ShardCheckpointDir(dir.path(), 0, 1) + "/ckpt-000000000003.ktc");
  EXPECT_TRUE(std::filesystem::exists(*path));
}

TEST(PsShard, ObserversLongPollForProgressOrTheEnd) {
  PsShardOptions o;
  o.num_workers = 1;
  o.mode = *ExchangeMode::Parse("async");
  FakeClock clock;
  PsShard shard(o, clock, [](const std::string&) {});
  ASSERT_TRUE(shard.Register(0, 16, "").ok());
  ASSERT_TRUE(shard.BeginStaging(0, 0, true).ok());
  ASSERT_TRUE(shard.CommitInitialize(0, 0, 100).ok());
  shard.EndStaging(0);
  std::vector<float> out(16);
  absl::StatusOr<PullResult> now = shard.Pull(kObserver, 0, 0, out, nullptr);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->global_step, 0);
  absl::StatusOr<PullResult> later;
  std::thread observer([&] { later = shard.Pull(kObserver, 1, 0, out, nullptr); });
  shard.Done(0);  // the job ends without another step
  observer.join();
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->finished);
}

// Pipelined rounds (--ps-pipeline) straight on the shard: two workers'
// chunks of a range of three chunks, sgd with momentum.
class PipelinedRound : public ::testing::Test {
 protected:
  static constexpr int64_t kN = 2 * data_plane::kMinChunkValues + 1000;  // 3 chunks

  std::unique_ptr<PsShard> MakeShard(bool pipeline, const std::string& ckpt = "") {
    PsShardOptions o;
    o.num_workers = 2;
    o.mode = *ExchangeMode::Parse("sync");
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = 0.9f;
    o.lr.base_lr = 0.25f;
    o.pipeline = pipeline;
    o.checkpoint_dir = ckpt;
    auto s = std::make_unique<PsShard>(o, clock_, [](const std::string&) {});
    EXPECT_TRUE(s->Register(0, kN, "").ok());
    EXPECT_TRUE(s->Register(1, kN, "").ok());
    std::span<float> slot = *s->BeginStaging(0, 0, true);
    for (int64_t i = 0; i < kN; ++i) slot[i] = static_cast<float>(i % 31) * 0.5f;
    EXPECT_TRUE(*s->CommitInitialize(0, 0, 100));
    s->EndStaging(0);
    return s;
  }
  static float Grad(int worker, int64_t step, int64_t i) {
    return static_cast<float>((i * (worker + 2) + step) % 17) * 0.01f - 0.05f;
  }
  std::vector<float> Params(PsShard& s) {
    std::vector<float> out(kN);
    EXPECT_TRUE(s.Pull(0, 0, 0, out, {}).ok());
    return out;
  }
  RealClock clock_;
};

TEST_F(PipelinedRound, ACheckpointMidRoundHoldsTheStepBeforeItAndTheRoundGoesOn) {
  TempDir dir;
  std::unique_ptr<PsShard> piped = MakeShard(true, dir.path());
  std::unique_ptr<PsShard> plain = MakeShard(false);
  ASSERT_TRUE(piped->pipelined());
  for (int64_t step = 0; step < 2; ++step) {
    for (int w = 0; w < 2; ++w) {
      std::span<float> a = *piped->BeginStaging(w, step, false);
      std::span<float> b = *plain->BeginStaging(w, step, false);
      for (int64_t i = 0; i < kN; ++i) a[i] = b[i] = Grad(w, step, i);
      piped->EndStaging(w);  // PushChunk below stages nothing itself
      plain->EndStaging(w);
    }
    // Step 0 whole on both; step 1 on the pipelined shard: two chunks of
    // each worker, a checkpoint, then the last chunk.
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(plain->BeginStaging(w, step, false).ok());
      ASSERT_TRUE(plain->CommitPush(w, step).ok());
      plain->EndStaging(w);
    }
    if (step == 0) {
      for (int w = 0; w < 2; ++w) {
        ASSERT_TRUE(piped->BeginStaging(w, step, false).ok());
        ASSERT_TRUE(piped->CommitPush(w, step).ok());
        piped->EndStaging(w);
      }
      continue;
    }
    const std::vector<float> after_step0 = Params(*piped);
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(piped->BeginStaging(w, step, false).ok());
      for (int64_t c = 0; c < 2; ++c) ASSERT_TRUE(*piped->PushChunk(w, step, c, 0));
    }
    absl::StatusOr<RoundRead> mid = piped->WaitRound(0, step, 0, 0, testing_util::GiveUpAfter());
    ASSERT_TRUE(mid.ok());
    EXPECT_EQ(mid->ready, 2);
    EXPECT_FALSE(mid->committed);
    ASSERT_TRUE(piped->WriteCheckpointNow().ok());
    absl::StatusOr<exchange::CheckpointData> ckpt =
        exchange::LoadLatestCheckpoint(dir.path(), 0, 1, [](const std::string&) {});
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ(ckpt->header.global_step(), 1);
    EXPECT_EQ(ckpt->header.optimizer_steps(), 1);
    EXPECT_EQ(ckpt->params, after_step0);
    // The round was applied again after the checkpoint: a sender that had
    // sent chunks of it starts again, one that had not goes on.
    absl::StatusOr<RoundRead> again =
        piped->WaitRound(0, step, mid->attempt, 2, testing_util::GiveUpAfter());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->kind, RoundRead::Kind::kRestart);
    for (int w = 0; w < 2; ++w) {
      ASSERT_TRUE(*piped->PushChunk(w, step, 2, 0));
      piped->EndStaging(w);
    }
    absl::StatusOr<RoundRead> done = piped->WaitRound(0, step, 0, 0, testing_util::GiveUpAfter());
    ASSERT_TRUE(done.ok());
    EXPECT_TRUE(done->committed);
    EXPECT_EQ(done->global_step, 2);
    // The checkpoint's state was the step before: restoring it and
    // applying step 1 whole gives the same parameters.
    std::unique_ptr<PsShard> restored = MakeShard(false, dir.path());
    ASSERT_EQ(*restored->RestoreFromCheckpoint(), 1);
    for (int w = 0; w < 2; ++w) {
      std::span<float> g = *restored->BeginStaging(w, step, false);
      for (int64_t i = 0; i < kN; ++i) g[i] = Grad(w, step, i);
      ASSERT_TRUE(restored->CommitPush(w, step).ok());
      restored->EndStaging(w);
    }
    EXPECT_EQ(Params(*restored), Params(*plain));
  }
  EXPECT_EQ(Params(*piped), Params(*plain));
}

TEST_F(PipelinedRound, OutOfOrderChunksAndFuturePushesAreRefused) {
  std::unique_ptr<PsShard> s = MakeShard(true);
  ASSERT_TRUE(s->BeginStaging(0, 0, false).ok());
  EXPECT_THAT(std::string(s->PushChunk(0, 0, 1, 0).status().message()), HasSubstr("out of order"));
  s->EndStaging(0);
  ASSERT_TRUE(s->BeginStaging(1, 5, false).ok());
  EXPECT_THAT(std::string(s->PushChunk(1, 5, 0, 0).status().message()),
              HasSubstr("from the future"));
  s->AbortPush(1);
  s->EndStaging(1);
  EXPECT_EQ(s->Status().rejected_pushes(), 1);
  EXPECT_EQ(s->global_step(), 0);
}

// A worker that finishes while the others' chunks wait for it releases
// the round: it no longer counts among the contributors.
// A worker that delivered its whole gradient and then finished still
// counts in that step, as on the plain path: the step averages both.
TEST_F(PipelinedRound, AGradientDeliveredBeforeFinishingStillCounts) {
  std::unique_ptr<PsShard> piped = MakeShard(true);
  std::unique_ptr<PsShard> plain = MakeShard(false);
  const int64_t chunks = data_plane::NumChunks(kN);
  for (PsShard* s : {piped.get(), plain.get()}) {
    for (int w = 0; w < 2; ++w) {
      std::span<float> g = *s->BeginStaging(w, 0, false);
      for (int64_t i = 0; i < kN; ++i) g[i] = Grad(w, 0, i);
      s->EndStaging(w);
    }
  }
  // Worker 1 delivers all, then finishes; worker 0 delivers afterwards.
  ASSERT_TRUE(piped->BeginStaging(1, 0, false).ok());
  for (int64_t c = 0; c < chunks; ++c) ASSERT_TRUE(*piped->PushChunk(1, 0, c, 0));
  piped->EndStaging(1);
  piped->Done(1);
  ASSERT_TRUE(piped->BeginStaging(0, 0, false).ok());
  for (int64_t c = 0; c < chunks; ++c) ASSERT_TRUE(*piped->PushChunk(0, 0, c, 0));
  piped->EndStaging(0);
  for (int w : {1, 0}) {
    ASSERT_TRUE(plain->BeginStaging(w, 0, false).ok());
    ASSERT_TRUE(plain->CommitPush(w, 0).ok());
    plain->EndStaging(w);
    if (w == 1) plain->Done(1);
  }
  EXPECT_EQ(piped->global_step(), 1);
  EXPECT_EQ(plain->global_step(), 1);
  EXPECT_EQ(Params(*piped), Params(*plain));
}

// A worker that finishes in the middle of its push no longer counts: the
// chunks it gave are taken back and the step is the other worker's alone.
TEST_F(PipelinedRound, AWorkerThatFinishesMidPushIsTakenBack) {
  std::unique_ptr<PsShard> piped = MakeShard(true);
  std::unique_ptr<PsShard> alone = MakeShard(false);
  for (int w = 0; w < 2; ++w) {
    std::span<float> g = *piped->BeginStaging(w, 0, false);
    for (int64_t i = 0; i < kN; ++i) g[i] = Grad(w, 0, i);
    piped->EndStaging(w);
  }
  ASSERT_TRUE(piped->BeginStaging(0, 0, false).ok());
  ASSERT_TRUE(piped->BeginStaging(1, 0, false).ok());
  for (int w = 0; w < 2; ++w) ASSERT_TRUE(*piped->PushChunk(w, 0, 0, 0));
  absl::StatusOr<RoundRead> mid = piped->WaitRound(0, 0, 0, 0, testing_util::GiveUpAfter());
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->ready, 1);
  piped->Done(1);  // chunk 0 of worker 1 no longer counts
  for (int64_t c = 1; c < data_plane::NumChunks(kN); ++c) {
    ASSERT_TRUE(*piped->PushChunk(0, 0, c, 0));
  }
  piped->EndStaging(0);
  piped->EndStaging(1);
  alone->Done(1);
  std::span<float> g = *alone->BeginStaging(0, 0, false);
  for (int64_t i = 0; i < kN; ++i) g[i] = Grad(0, 0, i);
  ASSERT_TRUE(alone->CommitPush(0, 0).ok());
  alone->EndStaging(0);
  EXPECT_EQ(piped->global_step(), 1);
  EXPECT_EQ(Params(*piped), Params(*alone));
}

TEST_F(PipelinedRound, AWorkerThatFinishesNoLongerHoldsTheRound) {
  std::unique_ptr<PsShard> s = MakeShard(true);
  ASSERT_TRUE(s->BeginStaging(0, 0, false).ok());
  const int64_t chunks = data_plane::NumChunks(kN);
  for (int64_t c = 0; c < chunks; ++c) ASSERT_TRUE(*s->PushChunk(0, 0, c, 0));
  s->EndStaging(0);
  EXPECT_EQ(s->global_step(), 0);
  EXPECT_FALSE(s->Done(1));
  EXPECT_EQ(s->global_step(), 1);
}

}  // namespace
}  // namespace kubetrain::ps
