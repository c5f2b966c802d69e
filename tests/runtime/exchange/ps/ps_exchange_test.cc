// PsExchange against loopback shards, for issue 29's faults and elastic
// workers: a shard that restarts mid-run (from its checkpoint, or empty)
// while the workers keep their exchange objects; a sync job that grows from
// 2 to 3 workers; a worker that leaves. Workers are threads, each with its
// own PsExchange, stepping as the trainer does (following the step the
// exchange returns).
#include "runtime/exchange/ps/ps_exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "testing/loopback_shard.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::ps {
namespace {

using ::testing::HasSubstr;
using testing_util::WaitFor;

constexpr int kParams = 64;

// Lines logged by one party, readable while it logs.
class Lines {
 public:
  std::function<void(const std::string&)> Logger() {
    return [this](const std::string& l) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(l);
    };
  }
  std::string Joined() const {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const std::string& l : lines_) out += l + "\n";
    return out;
  }
  // The first line containing `needle`, empty if none.
  std::string Find(const std::string& needle) const {
    absl::MutexLock lock(&mu_);
    for (const std::string& l : lines_) {
      if (l.find(needle) != std::string::npos) return l;
    }
    return "";
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

PsShardOptions ShardOptions(const std::string& mode, int num_workers, float momentum,
                            const std::string& checkpoint_dir, uint64_t incarnation,
                            bool pipeline = false) {
  PsShardOptions o;
  o.pipeline = pipeline;
  o.num_workers = num_workers;
  o.mode = *ExchangeMode::Parse(mode);
  o.optimizer.kind = "sgd";
  o.optimizer.momentum = momentum;
  o.lr.base_lr = 0.05f;
  o.incarnation = incarnation;
  o.checkpoint_dir = checkpoint_dir;
  o.checkpoint_every_steps = checkpoint_dir.empty() ? 0 : 1;
  o.keep_checkpoints = 2;
  return o;
}

// A gradient that depends on the worker, the step and the parameters, so a
// step lost, doubled or computed from other parameters changes the result.
std::vector<float> Gradient(int worker, int64_t step, const std::vector<float>& params) {
  std::vector<float> g(params.size());
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.5f * params[i] -
           static_cast<float>((static_cast<int64_t>(i) + worker + step) % 7) * 0.125f;
  }
  return g;
}

// One worker: its exchange and its parameters, stepping on a thread of its
// own until `steps`, following the step the exchange returns.
struct Worker {
  Worker(int id, const std::string& address, const std::string& mode, int64_t total_steps,
         int num_params = kParams)
      : id(id) {
    PsExchangeOptions o;
    o.ps_addresses = {address};
    o.worker = id;
    o.worker_name = "worker-" + std::to_string(id);
    o.initializer = id == 0;
    o.mode = *ExchangeMode::Parse(mode);
    o.peer_timeout_seconds = 60;
    o.total_steps = total_steps;
    exchange = std::make_unique<PsExchange>(o, clock, log.Logger());
    params.assign(static_cast<size_t>(num_params), 0.0f);
    for (int i = 0; i < num_params; ++i) params[i] = 1.0f + 0.01f * static_cast<float>(i % 64);
  }
  // Start, then steps until `until`; `gradient` picks what is pushed.
  void Run(int64_t until,
           const std::function<std::vector<float>(int, int64_t, const std::vector<float>&)>&
               gradient = Gradient) {
    thread = std::thread([this, until, gradient] {
      absl::StatusOr<int64_t> s = exchange->Start(params);
      if (!s.ok()) {
        status = s.status();
        return;
      }
      step = *s;
      started = true;
      while (step < until && !stop) {
        if (step == hold_at && !WaitFor([&] { return release.load(); }, absl::Seconds(60))) {
          status = absl::DeadlineExceededError("never released");
          return;
        }
        std::vector<float> g = gradient(id, step, params);
        ++steps_called;
        absl::StatusOr<int64_t> next = exchange->Step(step, g, params);
        if (!next.ok()) {
          status = next.status();
          return;
        }
        step = *next;
        ++steps_taken;
      }
      status = leave_at_end ? absl::OkStatus() : exchange->Finish();
      if (leave_at_end) exchange->Leave("scaled down (test)");
    });
  }
  void Join() {
    if (thread.joinable()) thread.join();
  }

  int id;
  RealClock clock;
  Lines log;
  std::unique_ptr<PsExchange> exchange;
  std::vector<float> params;
  std::thread thread;
  std::atomic<int64_t> step{0};
  std::atomic<int64_t> steps_taken{0};
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  bool leave_at_end = false;  // Leave instead of Finish (set before Run)
  // Before step `hold_at` the worker waits until `release` (set before Run).
  int64_t hold_at = -1;
  std::atomic<bool> release{false};
  std::atomic<int64_t> steps_called{0};  // Step calls begun
  absl::Status status;
};

// The parameters two workers end with after `steps` sync steps on one shard
// that never fails: the reference a restarted shard must reproduce.
std::vector<float> Reference(float momentum, int64_t steps) {
  Lines shard_log;
  LoopbackShard shard(ShardOptions("sync", 2, momentum, "", 1), 0, /*tcp=*/true,
                      shard_log.Logger());
  Worker a(0, shard.address(), "sync", steps), b(1, shard.address(), "sync", steps);
  a.Run(steps);
  b.Run(steps);
  a.Join();
  b.Join();
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(a.params, b.params);
  return a.params;
}

// A sync shard restarted mid-run: both workers keep their exchanges, wait
// for it, and finish; with its checkpoint (written every step) the result
// is bit for bit that of a run without the restart: no step lost or
// doubled (the round in flight is redone), the optimizer state restored.
TEST(PsExchangeShardRestart, FromItsCheckpointTheWorkersFinishAsIfNothingHappened) {
  constexpr int64_t kSteps = 24;
  constexpr int64_t kKillAt = 10;
  constexpr float kMomentum = 0.9f;
  const std::vector<float> want = Reference(kMomentum, kSteps);

  data::testing_util::TempDir dir;
  Lines shard_log;
  auto shard = std::make_unique<LoopbackShard>(ShardOptions("sync", 2, kMomentum, dir.path(), 1), 0,
                                               /*tcp=*/true, shard_log.Logger());
  const int port = shard->port();
  Worker a(0, shard->address(), "sync", kSteps), b(1, shard->address(), "sync", kSteps);
  // Worker 0 holds before round kKillAt; worker 1 sends it and waits in it
  // when the shard dies: the round in flight.
  a.hold_at = kKillAt;
  a.Run(kSteps);
  b.Run(kSteps);
  ASSERT_TRUE(WaitFor([&] { return b.steps_called > kKillAt; }));
  shard.reset();  // the PS process dies: no final checkpoint
  shard = std::make_unique<LoopbackShard>(ShardOptions("sync", 2, kMomentum, dir.path(), 2), port,
                                          /*tcp=*/true, shard_log.Logger());
  EXPECT_EQ(shard->restored_step(), kKillAt);
  a.release = true;
  a.Join();
  b.Join();
  ASSERT_TRUE(a.status.ok()) << a.status << "\n" << a.log.Joined();
  ASSERT_TRUE(b.status.ok()) << b.status << "\n" << b.log.Joined();
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.params, want);
  EXPECT_EQ(shard->shard().global_step(), kSteps);
  for (Worker* w : {&a, &b}) {
    EXPECT_THAT(w->log.Joined(), HasSubstr("ps-0 restarted: resumed from its checkpoint at step " +
                                           std::to_string(shard->restored_step())));
  }
}

// The same without a checkpoint: the shard comes back empty and the first
// worker to register re-initialises it from the parameters it holds (its
// last pull, the same on both in sync mode). Plain sgd keeps no optimizer
// state, so nothing is lost: the result is again the reference's.
TEST(PsExchangeShardRestart, EmptyItIsReinitialisedFromTheWorkersParameters) {
  constexpr int64_t kSteps = 24;
  constexpr int64_t kKillAt = 10;
  const std::vector<float> want = Reference(0.0f, kSteps);

  Lines shard_log;
  auto shard = std::make_unique<LoopbackShard>(ShardOptions("sync", 2, 0.0f, "", 1), 0,
                                               /*tcp=*/true, shard_log.Logger());
  const int port = shard->port();
  Worker a(0, shard->address(), "sync", kSteps), b(1, shard->address(), "sync", kSteps);
  a.hold_at = kKillAt;
  a.Run(kSteps);
  b.Run(kSteps);
  ASSERT_TRUE(WaitFor([&] { return b.steps_called > kKillAt; }));
  shard.reset();
  shard = std::make_unique<LoopbackShard>(ShardOptions("sync", 2, 0.0f, "", 2), port,
                                          /*tcp=*/true, shard_log.Logger());
  EXPECT_EQ(shard->restored_step(), -1);
  a.release = true;
  a.Join();
  b.Join();
  ASSERT_TRUE(a.status.ok()) << a.status << "\n" << a.log.Joined();
  ASSERT_TRUE(b.status.ok()) << b.status << "\n" << b.log.Joined();
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.params, want);
  EXPECT_EQ(shard->shard().global_step(), kSteps);
  // One of them gave the parameters; both say whose.
  const std::string line = shard_log.Find("initialised by worker-");
  ASSERT_FALSE(line.empty()) << shard_log.Joined();
  for (Worker* w : {&a, &b}) {
    EXPECT_THAT(w->log.Joined(), HasSubstr("ps-0 restarted: re-initialised from worker-"))
        << w->log.Joined();
  }
}

// Async: a shard that comes back empty is re-initialised from a worker's
// last pull, and each worker continues at its own clock (the shard lost
// them): no worker starts over, both finish.
TEST(PsExchangeShardRestart, AsyncWorkersContinueAtTheirOwnClocks) {
  constexpr int64_t kSteps = 24;
  constexpr int64_t kKillAt = 10;
  Lines shard_log;
  auto shard = std::make_unique<LoopbackShard>(ShardOptions("async", 2, 0.0f, "", 1), 0,
                                               /*tcp=*/true, shard_log.Logger());
  const int port = shard->port();
  Worker a(0, shard->address(), "async", kSteps), b(1, shard->address(), "async", kSteps);
  // Async workers do not wait for each other: both hold, at different
  // clocks, while the shard dies and comes back.
  a.hold_at = kKillAt;
  b.hold_at = kKillAt + 2;
  a.Run(kSteps);
  b.Run(kSteps);
  ASSERT_TRUE(WaitFor([&] { return a.step == kKillAt && b.step == kKillAt + 2; }));
  shard.reset();
  shard = std::make_unique<LoopbackShard>(ShardOptions("async", 2, 0.0f, "", 2), port,
                                          /*tcp=*/true, shard_log.Logger());
  a.release = true;
  b.release = true;
  a.Join();
  b.Join();
  ASSERT_TRUE(a.status.ok()) << a.status << "\n" << a.log.Joined();
  ASSERT_TRUE(b.status.ok()) << b.status << "\n" << b.log.Joined();
  // Each pushed its kSteps gradients once, give or take the one in flight.
  EXPECT_LE(a.steps_taken.load(), kSteps + 1) << a.log.Joined();
  EXPECT_LE(b.steps_taken.load(), kSteps + 1) << b.log.Joined();
  const v1::StatusResponse st = shard->shard().Status();
  EXPECT_EQ(st.worker_clocks(0), kSteps) << a.log.Joined() << shard_log.Joined();
  EXPECT_EQ(st.worker_clocks(1), kSteps) << b.log.Joined();
  EXPECT_THAT(a.log.Joined() + b.log.Joined(), HasSubstr("ps-0 restarted: re-initialised from"));
}

// The parameter value after a run where every worker pushes a constant
// gradient (worker w: w + 1): each sync round subtracts lr * the mean of the
// counted workers' constants, so the value tells how many rounds each count
// made.
std::vector<float> ConstantGradient(int worker, int64_t, const std::vector<float>& params) {
  return std::vector<float>(params.size(), static_cast<float>(worker + 1));
}

// The number after `prefix` in `line`.
int64_t NumberAfter(const std::string& line, const std::string& prefix) {
  const size_t at = line.find(prefix);
  if (at == std::string::npos) return -1;
  size_t end = at + prefix.size();
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  int64_t n = -1;
  if (!absl::SimpleAtoi(line.substr(at + prefix.size(), end - at - prefix.size()), &n)) return -1;
  return n;
}

// A sync job of 2 workers that a third joins mid-run: the shard counts it
// from a round boundary, and every round aggregates exactly the workers it
// counted: 2 before, 3 after. The newcomer starts from the shard's current
// parameters and step, and all three end with the same parameters.
// Plain rounds over a small range, or pipelined ones over three chunks.
class PsExchangeElastic : public ::testing::TestWithParam<bool> {
 protected:
  bool pipeline() const { return GetParam(); }
  int num_params() const { return pipeline() ? 3 * 16384 + 100 : kParams; }
};

INSTANTIATE_TEST_SUITE_P(Rounds, PsExchangeElastic, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Pipelined" : "Plain";
                         });

TEST_P(PsExchangeElastic, AThirdWorkerJoinsASyncJobAtARoundBoundary) {
  constexpr int64_t kSteps = 30;
  Lines shard_log;
  LoopbackShard shard(ShardOptions("sync", 2, 0.0f, "", 1, pipeline()), 0, /*tcp=*/true,
                      shard_log.Logger());
  ASSERT_EQ(shard.shard().pipelined(), pipeline());
  Worker a(0, shard.address(), "sync", kSteps, num_params()),
      b(1, shard.address(), "sync", kSteps, num_params());
  constexpr int64_t kJoinAt = 15;
  // Worker 0 holds before round kJoinAt until the newcomer has started;
  // worker 1 may already have sent its gradient for that round.
  a.hold_at = kJoinAt;
  a.Run(kSteps, ConstantGradient);
  b.Run(kSteps, ConstantGradient);
  ASSERT_TRUE(WaitFor([&] { return b.steps_called > kJoinAt; }));
  Worker c(2, shard.address(), "sync", kSteps, num_params());
  c.Run(kSteps, ConstantGradient);
  ASSERT_TRUE(WaitFor([&] { return c.started.load() || !c.status.ok(); }));
  a.release = true;
  a.Join();
  b.Join();
  c.Join();
  for (Worker* w : {&a, &b, &c}) ASSERT_TRUE(w->status.ok()) << w->id << ": " << w->status;
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.params, c.params);
  EXPECT_EQ(shard.shard().global_step(), kSteps);
  EXPECT_TRUE(shard.shard().finished());

  const std::string joined = shard_log.Find("worker-2 joined at step ");
  ASSERT_FALSE(joined.empty()) << shard_log.Joined();
  const int64_t from = NumberAfter(joined, "counted from step ");
  // Round kJoinAt, if worker 1's gradient was in when it joined, is not its.
  ASSERT_GE(from, kJoinAt) << joined;
  ASSERT_LE(from, kJoinAt + 1) << joined;
  // Rounds [0, from) averaged 1 and 2; rounds [from, kSteps) 1, 2 and 3.
  const double lr = 0.05;
  for (int i = 0; i < num_params(); i += pipeline() ? 997 : 1) {
    const double start = 1.0 + 0.01 * (i % 64);
    const double want =
        start - lr * (1.5 * static_cast<double>(from) + 2.0 * static_cast<double>(kSteps - from));
    EXPECT_NEAR(a.params[i], want, 1e-4) << "parameter " << i << "; " << joined;
  }
  // The newcomer started at the shard's step, not at 0.
  EXPECT_LE(c.steps_taken.load(), kSteps - kJoinAt);
}

// A worker that leaves gracefully (Leave, as on SIGTERM) is not waited for:
// its rounds so far counted three, every later one two, and the others
// finish; the shard's job ends when they do.
TEST_P(PsExchangeElastic, AWorkerLeavingIsNotWaitedFor) {
  constexpr int64_t kSteps = 30;
  constexpr int64_t kLeaveAt = 10;
  Lines shard_log;
  LoopbackShard shard(ShardOptions("sync", 3, 0.0f, "", 1, pipeline()), 0, /*tcp=*/true,
                      shard_log.Logger());
  Worker a(0, shard.address(), "sync", kSteps, num_params()),
      b(1, shard.address(), "sync", kSteps, num_params()),
      c(2, shard.address(), "sync", kSteps, num_params());
  c.leave_at_end = true;
  a.Run(kSteps, ConstantGradient);
  b.Run(kSteps, ConstantGradient);
  c.Run(kLeaveAt, ConstantGradient);  // rounds 0..9, then leaves
  c.Join();
  ASSERT_TRUE(c.status.ok()) << c.status;
  // Without the leave, round 10 would wait for worker 2 until its peer
  // timeout: give up well before, unblocking the others.
  const bool finished =
      WaitFor([&] { return a.step >= kSteps && b.step >= kSteps; }, absl::Seconds(60));
  if (!finished) shard.shard().Abort(absl::AbortedError("the test gave up"));
  a.Join();
  b.Join();
  ASSERT_TRUE(finished) << shard_log.Joined();
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(shard.shard().global_step(), kSteps);
  EXPECT_TRUE(shard.shard().finished());
  EXPECT_EQ(shard.shard().Status().workers_left(), 1);
  EXPECT_EQ(shard.shard().Status().workers_counted(), 0);  // all finished or left
  EXPECT_THAT(shard_log.Joined(), HasSubstr("worker-2 left at step 10: scaled down (test)"));
  const double lr = 0.05;
  for (int i = 0; i < num_params(); i += pipeline() ? 997 : 1) {
    const double start = 1.0 + 0.01 * (i % 64);
    const double want = start - lr * (2.0 * kLeaveAt + 1.5 * (kSteps - kLeaveAt));
    EXPECT_NEAR(a.params[i], want, 1e-4) << "parameter " << i;
  }
}

}  // namespace
}  // namespace kubetrain::ps
