// AllreduceExchange with real ranks on loopback (threads of one process):
// every rank ends with identical parameters equal to one optimizer on the
// averaged gradient; buckets released during backward overlap it (shown on
// a throttled link); a stalled rank is named, then declared lost; a
// restarted job resumes from rank 0's checkpoint.
#include "runtime/exchange/allreduce/allreduce_exchange.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/launcher/loopback_ports.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::allreduce {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RealClock& TheClock() {
  static RealClock clock;
  return clock;
}

optim::LrSchedule Constant(float lr) {
  optim::LrScheduleOptions o;
  o.kind = "constant";
  o.base_lr = lr;
  return *optim::LrSchedule::Create(o);
}

struct Logs {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> g(mu);
      lines.push_back(l);
    };
  }
  bool Has(const std::string& s) {
    std::lock_guard<std::mutex> g(mu);
    for (const auto& l : lines) {
      if (l.find(s) != std::string::npos) return true;
    }
    return false;
  }
};

AllreduceExchangeOptions Options(int world, int rank, int port) {
  AllreduceExchangeOptions o;
  o.rank = rank;
  for (int i = 0; i < world; ++i) o.names.push_back(absl::StrCat("worker-", i));
  o.rendezvous_address = absl::StrCat("127.0.0.1:", port);
  o.rendezvous_listen_address = absl::StrCat("127.0.0.1:", port);
  o.data_listen_host = "127.0.0.1";
  o.data_advertise_host = "127.0.0.1";
  o.token = "job-token";
  o.rendezvous_timeout_seconds = 30;
  o.heartbeat_seconds = 0.05;
  o.optimizer.kind = "sgd";
  o.optimizer.momentum = 0.9f;
  return o;
}

int FreePort() {
  absl::StatusOr<std::vector<int>> p = launcher::AllocateLoopbackPorts(1);
  EXPECT_TRUE(p.ok()) << p.status();
  return (*p)[0];
}

// Gradient of rank r at step s: multiples of 1/4, so sums are exact.
float Grad(int r, int step, int64_t i) {
  return static_cast<float>(((i * 5 + r * 3 + step) % 13) - 6) * 0.25f;
}

TEST(AllreduceExchange, RanksStayIdenticalAndMatchOneOptimizerOnTheMean) {
  const int world = 3;
  const int64_t n = 1003;
  const int steps = 5;
  const int port = FreePort();
  std::vector<std::vector<float>> params(world, std::vector<float>(n));
  std::vector<absl::Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o = Options(world, r, port);
      o.bucket_bytes = 400;  // 100 floats: 11 buckets
      o.chunk_bytes = 64;
      AllreduceExchange ex(o, Constant(0.1f), TheClock(), [](const std::string&) {});
      std::vector<float>& p = params[r];
      // Only rank 0's initial values may survive Start.
      for (int64_t i = 0; i < n; ++i) p[i] = r == 0 ? 0.01f * static_cast<float>(i % 7) : 99.0f;
      absl::StatusOr<int64_t> start = ex.Start(p);
      if (!start.ok()) {
        status[r] = start.status();
        return;
      }
      std::vector<float> g(n);
      for (int s = 0; s < steps; ++s) {
        for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, s, i);
        // Backward hands buckets over from the end of the buffer.
        for (int64_t from = n - 250; from > 0; from -= 250) ex.GradientsReady(g, from);
        absl::StatusOr<int64_t> next = ex.Step(s, g, p);
        if (!next.ok()) {
          status[r] = next.status();
          return;
        }
        EXPECT_EQ(*next, s + 1);
      }
      status[r] = ex.Finish();
      EXPECT_GT(ex.buckets_started_early(), 0);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];

  // Reference: one optimizer on the averaged gradient.
  std::vector<float> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = 0.01f * static_cast<float>(i % 7);
  optim::OptimizerOptions oo;
  oo.kind = "sgd";
  oo.momentum = 0.9f;
  auto opt = *optim::MakeOptimizer(oo, n);
  std::vector<float> mean(n);
  for (int s = 0; s < steps; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int r = 0; r < world; ++r) sum += Grad(r, s, i);
      mean[i] = sum * (1.0f / world);
    }
    opt->Apply(ref, mean, 0.1f);
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(std::memcmp(params[r].data(), ref.data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from the single-optimizer reference";
  }
}

TEST(AllreduceExchange, BucketsOverlapBackwardOnAThrottledLink) {
  // 16 MB of gradients in 8 buckets over a 40 MB/s link (about 0.4 s of
  // exchange), and a backward pass of 8 slices of 50 ms (emulated compute,
  // as a GPU would run it). Without overlap a step costs compute + exchange;
  // with buckets released during backward it must cost less.
  const int world = 2;
  const int64_t n = 4 << 20;
  const int port = FreePort();
  std::vector<double> exchange_only(world), compute_only(world), overlapped(world);
  std::vector<absl::Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o = Options(world, r, port);
      o.bucket_bytes = 2 << 20;
      o.max_send_rate = 40e6;
      AllreduceExchange ex(o, Constant(0.01f), TheClock(), [](const std::string&) {});
      std::vector<float> p(n, 0.0f), g(n, 1.0f);
      if (absl::StatusOr<int64_t> s = ex.Start(p); !s.ok()) {
        status[r] = s.status();
        return;
      }
      auto backward = [&](bool release) {
        const int slices = 8;
        for (int k = 1; k <= slices; ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // emulated compute
          if (release) ex.GradientsReady(g, n - n * k / slices);
        }
      };
      double t0 = TheClock().NowSeconds();
      absl::StatusOr<int64_t> s = ex.Step(0, g, p);  // exchange alone
      exchange_only[r] = TheClock().NowSeconds() - t0;
      t0 = TheClock().NowSeconds();
      backward(false);  // compute alone
      compute_only[r] = TheClock().NowSeconds() - t0;
      if (s.ok()) s = ex.Step(1, g, p);
      t0 = TheClock().NowSeconds();
      backward(true);  // compute with buckets released as they fill
      if (s.ok()) s = ex.Step(2, g, p);
      overlapped[r] = TheClock().NowSeconds() - t0;
      status[r] = s.ok() ? ex.Finish() : s.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(status[r].ok()) << status[r];
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r, ": exchange ", exchange_only[r], "s, compute ",
                              compute_only[r], "s, overlapped step ", overlapped[r], "s"));
    EXPECT_GT(exchange_only[r], 0.2);  // the throttle is in force
    EXPECT_LT(overlapped[r], 0.85 * (compute_only[r] + exchange_only[r]));
  }
}

TEST(AllreduceExchange, AStalledRankIsNamedThenDeclaredLost) {
  const int world = 3;
  const int port = FreePort();
  Logs logs0;
  std::vector<absl::Status> status(world);
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o = Options(world, r, port);
      o.stall_warning_seconds = 0.3;
      o.peer_timeout_seconds = 2;
      o.job_name = "fmnist";
      AllreduceExchange ex(
          o, Constant(0.1f), TheClock(), r == 0 ? logs0.Sink() : [](const std::string&) {});
      std::vector<float> p(64, 1.0f), g(64, 1.0f);
      if (absl::StatusOr<int64_t> s = ex.Start(p); !s.ok()) {
        status[r] = s.status();
        return;
      }
      if (r == 2) {  // worker-2 hangs in its compute: it never steps
        testing_util::WaitFor([&] { return release.load(); }, absl::Seconds(60));
        return;
      }
      status[r] = ex.Step(0, g, p).status();
    });
  }
  threads[0].join();
  threads[1].join();
  release = true;
  threads[2].join();
  for (int r : {0, 1}) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kAborted) << status[r];
    // Whom, with its rank and data address (what a person needs to find it).
    EXPECT_THAT(std::string(status[r].message()),
                HasSubstr("lost worker-2 (pod fmnist-worker-2, rank 2, 127.0.0.1:"));
  }
  EXPECT_TRUE(logs0.Has("has waited")) << "no stall warning logged";
  EXPECT_TRUE(logs0.Has("for: worker-2")) << "the stall warning does not name worker-2";
}

// The checkpoint policy's rule for a failed write (checkpoint_policy.h):
// periodic checkpoints that cannot be written (here the directory lies
// under a regular file) are logged and training goes on; the last step's
// checkpoint is the job's result, and its failure fails that step.
TEST(AllreduceExchange, AFailedPeriodicCheckpointIsLoggedButTheLastStepsFailsIt) {
  data::testing_util::TempDir dir;
  const std::string file = dir.path() + "/not-a-directory";
  { std::ofstream(file) << "x"; }
  const int64_t n = 16;
  AllreduceExchangeOptions o = Options(1, 0, FreePort());
  o.checkpoint_dir = file + "/ckpt";
  o.checkpoint_every_steps = 1;
  o.checkpoint_every_seconds = 0;
  o.total_steps = 3;
  Logs logs;
  AllreduceExchange ex(o, Constant(0.1f), TheClock(), logs.Sink());
  std::vector<float> params(n, 1.0f), g(n, 0.5f);
  absl::StatusOr<int64_t> step = ex.Start(params);
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_EQ(*step, 0);
  for (int64_t s = 0; s < 2; ++s) {
    absl::StatusOr<int64_t> next = ex.Step(s, g, params);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(*next, s + 1);
  }
  EXPECT_TRUE(logs.Has("checkpoint at step 1 failed"));
  EXPECT_TRUE(logs.Has("checkpoint at step 2 failed"));
  absl::StatusOr<int64_t> last = ex.Step(2, g, params);
  EXPECT_FALSE(last.ok());
  EXPECT_THAT(std::string(last.status().message()), HasSubstr("not-a-directory"));
}

TEST(AllreduceExchange, ARestartedJobResumesFromRankZerosCheckpoint) {
  data::testing_util::TempDir dir;
  const int world = 2;
  const int64_t n = 257;
  std::vector<std::vector<float>> first(world, std::vector<float>(n));
  std::vector<int64_t> resumed(world, -1);
  std::vector<std::vector<float>> second(world, std::vector<float>(n));
  auto run = [&](std::vector<std::vector<float>>& params, int steps, bool record_start) {
    const int port = FreePort();
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        AllreduceExchangeOptions o = Options(world, r, port);
        if (r == 0) o.checkpoint_dir = dir.path();
        o.checkpoint_every_steps = 2;
        o.checkpoint_every_seconds = 0;
        AllreduceExchange ex(o, Constant(0.1f), TheClock(), [](const std::string&) {});
        for (int64_t i = 0; i < n; ++i) params[r][i] = static_cast<float>(r + i % 3);
        absl::StatusOr<int64_t> step = ex.Start(params[r]);
        ASSERT_TRUE(step.ok()) << step.status();
        if (record_start) resumed[r] = *step;
        std::vector<float> g(n);
        for (int s = 0; s < steps; ++s) {
          for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, s, i);
          ASSERT_TRUE(ex.Step(*step + s, g, params[r]).ok());
        }
        ASSERT_TRUE(ex.Finish().ok());
      });
    }
    for (auto& t : threads) t.join();
  };
  run(first, 4, false);
  run(second, 0, true);  // a new process of every rank
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(resumed[r], 4);
    EXPECT_EQ(std::memcmp(second[r].data(), first[0].data(), n * sizeof(float)), 0)
        << "rank " << r << " did not resume rank 0's checkpointed parameters";
  }
}

// SIGTERM on every rank (a suspended job): rank 1 leaves, so rank 0's step
// in flight fails; rank 0 then checkpoints the parameters of its last
// completed step (CheckpointNow), rank 1 writes none, and the job started
// again resumes exactly there.
TEST(AllreduceExchange, CheckpointNowOnRankZeroIsWhereTheRestartResumes) {
  data::testing_util::TempDir dir;
  const int world = 2;
  const int64_t n = 129;
  const int kDone = 3;  // steps every rank completes before rank 1 leaves
  std::vector<std::vector<float>> params(world, std::vector<float>(n));
  std::vector<std::string> paths(world, "unset");
  std::vector<float> saved;  // rank 0's parameters after its last completed step
  std::atomic<bool> rank0_done{false};
  {
    const int port = FreePort();
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        AllreduceExchangeOptions o = Options(world, r, port);
        o.checkpoint_dir = dir.path();  // rank 1's is ignored: only rank 0 writes
        o.checkpoint_every_steps = 1000;
        o.checkpoint_every_seconds = 0;
        o.total_steps = 100;
        o.peer_timeout_seconds = 10;
        AllreduceExchange ex(o, Constant(0.1f), TheClock(), [](const std::string&) {});
        for (int64_t i = 0; i < n; ++i) params[r][i] = static_cast<float>(i % 5);
        absl::StatusOr<int64_t> start = ex.Start(params[r]);
        ASSERT_TRUE(start.ok()) << start.status();
        int64_t step = *start;
        std::vector<float> g(n);
        for (int s = 0; s < kDone; ++s) {
          for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, s, i);
          absl::StatusOr<int64_t> next = ex.Step(step, g, params[r]);
          ASSERT_TRUE(next.ok()) << next.status();
          step = *next;
        }
        if (r == 1) {
          // Once rank 0 has its last sum too (a ring rank may finish first).
          ASSERT_TRUE(testing_util::WaitFor([&] { return rank0_done.load(); }));
          ex.Leave("worker-1 stopped by signal 15 (Terminated)");
        } else {
          saved = params[0];
          rank0_done = true;
          // Rank 1 is gone: this step cannot complete, and applies nothing.
          for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, kDone, i);
          EXPECT_FALSE(ex.Step(step, g, params[r]).ok());
          EXPECT_EQ(params[0], saved);
        }
        absl::StatusOr<std::string> path = ex.CheckpointNow(step, params[r]);
        ASSERT_TRUE(path.ok()) << path.status();
        paths[r] = *path;
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(paths[1], "");
  ASSERT_NE(paths[0], "");
  EXPECT_TRUE(std::filesystem::exists(paths[0])) << paths[0];

  // The job again: both ranks start from rank 0's checkpoint.
  std::vector<int64_t> resumed(world, -1);
  std::vector<std::vector<float>> again(world, std::vector<float>(n, -1.0f));
  const int port = FreePort();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o = Options(world, r, port);
      if (r == 0) o.checkpoint_dir = dir.path();
      AllreduceExchange ex(o, Constant(0.1f), TheClock(), [](const std::string&) {});
      absl::StatusOr<int64_t> start = ex.Start(again[r]);
      ASSERT_TRUE(start.ok()) << start.status();
      resumed[r] = *start;
      ASSERT_TRUE(ex.Finish().ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(resumed[r], kDone);
    EXPECT_EQ(again[r], saved) << "rank " << r;
  }
}

// A rank without a checkpoint directory writes none.
TEST(AllreduceExchange, CheckpointNowWithoutADirectoryWritesNothing) {
  AllreduceExchangeOptions o = Options(1, 0, FreePort());
  AllreduceExchange ex(o, Constant(0.1f), TheClock(), [](const std::string&) {});
  std::vector<float> params(8, 1.0f);
  ASSERT_TRUE(ex.Start(params).ok());
  absl::StatusOr<std::string> path = ex.CheckpointNow(0, params);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "");
}

// A suspended job (every pod gets SIGTERM): worker-0 leaves first and its
// rendezvous goes with it; worker-1, whose step failed, is re-forming and
// waits for a worker-0 that will not come back. Its own SIGTERM (Leave)
// ends that wait at once, so its pod exits within the grace period instead
// of waiting out --rendezvous-timeout. Fixed (max 0) and elastic (2..3).
void LeaveEndsAReformationThatWaitsForAGoneRankZero(int min_workers, int max_workers) {
  const int world = 2;
  const int64_t n = 129;
  const int port = FreePort();
  Logs logs1;
  std::atomic<AllreduceExchange*> rank1{nullptr};
  std::atomic<bool> rank0_gone{false}, left{false};
  absl::Status rank1_status;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o = Options(world, r, port);
      o.reform = true;
      o.min_workers = min_workers;
      o.max_workers = max_workers;
      o.peer_timeout_seconds = 60;  // nothing here may end by a timeout
      o.rendezvous_timeout_seconds = 60;
      auto ex = std::make_unique<AllreduceExchange>(
          o, Constant(0.1f), TheClock(),
          r == 1 ? logs1.Sink() : std::function<void(const std::string&)>([](auto&) {}));
      std::vector<float> params(n, 1.0f), g(n);
      absl::StatusOr<int64_t> start = ex->Start(params);
      ASSERT_TRUE(start.ok()) << start.status();
      int64_t step = *start;
      for (int s = 0; s < 2; ++s) {
        for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, s, i);
        absl::StatusOr<int64_t> next = ex->Step(step, g, params);
        ASSERT_TRUE(next.ok()) << next.status();
        step = *next;
      }
      if (r == 0) {
        ex->Leave("worker-0 stopped by signal 15 (Terminated)");
        ex.reset();  // the process exits: its rendezvous goes too
        rank0_gone = true;
        return;
      }
      rank1 = ex.get();
      ASSERT_TRUE(testing_util::WaitFor([&] { return rank0_gone.load(); }));
      for (int64_t i = 0; i < n; ++i) g[i] = Grad(r, 2, i);
      absl::StatusOr<int64_t> next = ex->Step(step, g, params);
      rank1_status = next.status();
      // The exchange lives until the test has called Leave on it.
      ASSERT_TRUE(testing_util::WaitFor([&] { return left.load(); }, absl::Seconds(120)));
    });
  }
  // Worker-1 is re-forming (maybe still asking the gone rendezvous): SIGTERM.
  const bool reforming =
      testing_util::WaitFor([&] { return logs1.Has("re-forming the world"); }, absl::Seconds(30));
  EXPECT_TRUE(reforming) << "worker-1 never re-formed";
  AllreduceExchange* ex1 = rank1.load();
  EXPECT_NE(ex1, nullptr);
  if (reforming && ex1 != nullptr) ex1->Leave("worker-1 stopped by signal 15 (Terminated)");
  left = true;  // every thread ends now, whatever failed
  for (auto& t : threads) t.join();
  // Cancelled: the Leave ended its join; Aborted (the loss of worker-0):
  // it came before the join began. Never the join's timeout.
  EXPECT_TRUE(absl::IsCancelled(rank1_status) || absl::IsAborted(rank1_status)) << rank1_status;
  EXPECT_THAT(std::string(rank1_status.message()), Not(HasSubstr("--rendezvous-timeout")));
}

TEST(AllreduceExchange, LeaveEndsAFixedWorldsWaitForAGoneRankZero) {
  LeaveEndsAReformationThatWaitsForAGoneRankZero(0, 0);
}

TEST(AllreduceExchange, LeaveEndsAnElasticWorldsWaitForAGoneRankZero) {
  LeaveEndsAReformationThatWaitsForAGoneRankZero(2, 3);
}

}  // namespace
}  // namespace kubetrain::allreduce
