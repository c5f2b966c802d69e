// What an allreduce rank exports about its world (docs/runtime.md,
// "Membership"), read from a real RuntimeMetrics registry as Prometheus
// would: ranks of one process on loopback, with `reform`, whose world
// loses, drops or gains a member. The first world sets kubetrain_world_size,
// kubetrain_world_generation and (rank 0 only) kubetrain_world_member; each
// re-formation sets them again and adds the rendezvous's joined/left/lost
// counts to kubetrain_membership_changes_total, once per generation the rank
// joined, also one whose links or state broadcast then failed.
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/metric_names.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/exchange/allreduce/rendezvous_client.h"
#include "runtime/exchange/allreduce/ring_handshake.h"
#include "runtime/exchange/tcp_link.h"
#include "runtime/launcher/loopback_ports.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/metrics/runtime_metrics.h"
#include "tests/runtime/exchange/allreduce/exchange_test_util.h"
#include "tests/support/metrics_test_util.h"
#include "tests/support/wait_for.h"

namespace kubetrain::allreduce {
namespace {

using ::kubetrain::testing_util::WaitFor;
using testing_util::ConstantLr;
using testing_util::ExchangeTestClock;
using testing_util::RankGrad;
using testing_util::RankOptions;

constexpr int64_t kN = 1003;
constexpr int64_t kSteps = 5;

// One rank's metrics, as a worker of an allreduce job registers them.
std::unique_ptr<metrics::RuntimeMetrics> RankMetrics() {
  metrics::RuntimeMetricsOptions o;
  o.training = true;
  o.allreduce = true;
  return std::make_unique<metrics::RuntimeMetrics>(o);
}

// A series as a scrape reads it; nullopt when the rank does not export it.
std::optional<double> Series(const metrics::RuntimeMetrics& m, const std::string& name,
                             const std::set<std::string>& labels = {}) {
  return metrics::testing_util::SumSeries(metrics::SerializeMetrics(*m.registry()), name, labels);
}
std::optional<double> Changes(const metrics::RuntimeMetrics& m, const std::string& change) {
  return Series(m, api::kMetricMembershipChanges,
                {absl::StrCat(api::kMetricLabelChange, "=\"", change, "\"")});
}
std::optional<double> Member(const metrics::RuntimeMetrics& m, const std::string& name) {
  return Series(m, api::kMetricWorldMember,
                {absl::StrCat(api::kMetricLabelMember, "=\"", name, "\"")});
}

// A rank's log, readable from the test's thread.
class RankLog {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> g(mu_);
      lines_.push_back(l);
    };
  }
  bool Has(const std::string& part) const {
    std::lock_guard<std::mutex> g(mu_);
    for (const std::string& l : lines_) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
  std::string All() const {
    std::lock_guard<std::mutex> g(mu_);
    std::string out;
    for (const std::string& l : lines_) absl::StrAppend(&out, l, "\n");
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// One rank: its exchange (on its own thread), model, metrics and log.
struct Rank {
  int index = 0;
  std::unique_ptr<metrics::RuntimeMetrics> metrics = RankMetrics();
  RankLog log;
  std::vector<float> params = std::vector<float>(kN, 0.5f);
  std::vector<float> grads = std::vector<float>(kN, 0.0f);
  int64_t step = 0;
  absl::Status status;

  // An elastic (min, max) world's rank, `names` the replicas that form the
  // first generation.
  std::unique_ptr<AllreduceExchange> Exchange(int names, int port, int min_workers,
                                              int max_workers) {
    AllreduceExchangeOptions o = RankOptions(names, index, port);
    o.bucket_bytes = 400;  // 100 floats a bucket
    o.chunk_bytes = 64;
    o.reform = true;
    o.min_workers = min_workers;
    o.max_workers = max_workers;
    o.metrics = metrics.get();
    return std::make_unique<AllreduceExchange>(o, ConstantLr(0.1f), ExchangeTestClock(),
                                               log.Sink());
  }

  bool Start(AllreduceExchange& ex) {
    absl::StatusOr<int64_t> s = ex.Start(params);
    if (!s.ok()) {
      status = s.status();
      return false;
    }
    step = *s;
    return true;
  }

  // Steps while `more(step)` holds, taking whatever step Step says runs
  // next (the aborted one again after a re-formation).
  bool StepWhile(AllreduceExchange& ex, const std::function<bool(int64_t)>& more) {
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    while (more(step)) {
      if (absl::Now() > deadline) {
        status = absl::DeadlineExceededError(absl::StrCat("still stepping at step ", step));
        return false;
      }
      for (int64_t i = 0; i < kN; ++i) {
        grads[static_cast<size_t>(i)] = RankGrad(index, static_cast<int>(step), i);
      }
      for (int64_t from = kN - 250; from > 0; from -= 250) ex.GradientsReady(grads, from);
      absl::StatusOr<int64_t> next = ex.Step(step, grads, params);
      if (!next.ok()) {
        status = next.status();
        return false;
      }
      step = *next;
    }
    return true;
  }

  void Finish(AllreduceExchange& ex) { status = ex.Finish(); }
};

int FreePort() {
  absl::StatusOr<std::vector<int>> p = launcher::AllocateLoopbackPorts(1);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? (*p)[0] : 0;
}

// What rank `r` exports about its world: size, generation and the changes
// it has counted.
void ExpectWorld(const Rank& r, int size, int generation, int joined, int left, int lost) {
  SCOPED_TRACE(absl::StrCat("worker-", r.index));
  const metrics::RuntimeMetrics& m = *r.metrics;
  EXPECT_EQ(Series(m, api::kMetricWorldSize), size);
  EXPECT_EQ(Series(m, api::kMetricWorldGeneration), generation);
  EXPECT_EQ(Changes(m, "joined"), joined);
  EXPECT_EQ(Changes(m, "left"), left);
  EXPECT_EQ(Changes(m, "lost"), lost);
}

// A world of three (elastic, 2..3) trains two steps; then worker-2 goes:
// its exchange is torn down without a word (lost) or after Leave (a
// scale-down: left). The survivors re-form a world of two.
void LoseWorkerTwo(bool leaves) {
  const int port = FreePort();
  std::vector<Rank> ranks(3);
  std::atomic<int> at_step_two{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    ranks[static_cast<size_t>(r)].index = r;
    threads.emplace_back([&, r] {
      Rank& me = ranks[static_cast<size_t>(r)];
      std::unique_ptr<AllreduceExchange> ex = me.Exchange(3, port, 2, 3);
      const bool ok = me.Start(*ex) && me.StepWhile(*ex, [](int64_t s) { return s < 2; });
      ++at_step_two;
      if (!ok || !WaitFor([&] { return go.load(); }, absl::Seconds(60))) return;
      if (r == 2) {
        if (leaves) ex->Leave("stopped by signal 15 (Terminated)");
        return;  // the exchange goes: its links close, no Finish
      }
      if (me.StepWhile(*ex, [](int64_t s) { return s < kSteps; })) me.Finish(*ex);
    });
  }
  ASSERT_TRUE(WaitFor([&] { return at_step_two.load() == 3; }, absl::Seconds(60)));
  // The first world, as every rank exports it.
  for (const Rank& r : ranks) {
    ASSERT_TRUE(r.status.ok()) << "worker-" << r.index << ": " << r.status << "\n" << r.log.All();
    ExpectWorld(r, 3, 1, 0, 0, 0);
  }
  for (const char* name : {"worker-0", "worker-1", "worker-2"}) {
    EXPECT_EQ(Member(*ranks[0].metrics, name), 1) << name;
    EXPECT_EQ(Member(*ranks[1].metrics, name), std::nullopt) << "only rank 0 names members";
  }
  go = true;
  for (auto& t : threads) t.join();

  for (int r : {0, 1}) {
    const Rank& me = ranks[static_cast<size_t>(r)];
    ASSERT_TRUE(me.status.ok()) << "worker-" << r << ": " << me.status << "\n" << me.log.All();
    EXPECT_TRUE(me.log.Has("generation 2 formed")) << me.log.All();
    ExpectWorld(me, 2, 2, 0, leaves ? 1 : 0, leaves ? 0 : 1);
  }
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-0"), 1);
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-1"), 1);
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-2"), std::nullopt) << "a gone member's series goes";
  // The one that went saw no re-formation.
  ExpectWorld(ranks[2], 3, 1, 0, 0, 0);
}

TEST(MembershipMetrics, ALostMemberCountsOnceAndTheSurvivorsExportAWorldOfTwo) {
  LoseWorkerTwo(/*leaves=*/false);
}

TEST(MembershipMetrics, ALeavingMemberCountsAsLeftNotLost) { LoseWorkerTwo(/*leaves=*/true); }

// worker-0 and worker-1 of an elastic world (2..3) on `port`: each trains a
// step (counted in `trained`), then on while `more(exchange, step)`, and
// finishes.
void TrainTwo(std::vector<Rank>& ranks, int port, std::atomic<int>& trained,
              std::function<bool(AllreduceExchange&, int64_t)> more,
              std::vector<std::thread>& threads) {
  for (int r = 0; r < 2; ++r) {
    ranks[static_cast<size_t>(r)].index = r;
    threads.emplace_back([&ranks, &trained, more, port, r] {
      Rank& me = ranks[static_cast<size_t>(r)];
      std::unique_ptr<AllreduceExchange> ex = me.Exchange(2, port, 2, 3);
      if (!me.Start(*ex) || !me.StepWhile(*ex, [](int64_t s) { return s < 1; })) return;
      ++trained;
      AllreduceExchange& x = *ex;
      if (me.StepWhile(x, [&x, &more](int64_t s) { return more(x, s); })) me.Finish(x);
    });
  }
  ASSERT_TRUE(WaitFor([&] { return trained.load() == 2; }, absl::Seconds(60)))
      << ranks[0].status << " " << ranks[1].status;
}

TEST(MembershipMetrics, AJoinerGrowsTheWorldAndTheMembersCountIt) {
  // An elastic world of 2..3 forms with worker-0 and worker-1; worker-2
  // (a scale-up) joins while they train.
  const int port = FreePort();
  std::vector<Rank> ranks(3);
  std::atomic<int> trained{0};
  std::vector<std::thread> threads;
  // Until the world of three has taken kSteps steps.
  TrainTwo(
      ranks, port, trained,
      [](AllreduceExchange& x, int64_t s) { return x.world_size() < 3 || s < kSteps; }, threads);
  // Nothing joined yet: the first world of two.
  ExpectWorld(ranks[0], 2, 1, 0, 0, 0);
  ExpectWorld(ranks[1], 2, 1, 0, 0, 0);
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-1"), 1);
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-2"), std::nullopt);

  ranks[2].index = 2;
  threads.emplace_back([&] {
    Rank& me = ranks[2];
    std::unique_ptr<AllreduceExchange> ex = me.Exchange(2, port, 2, 3);
    if (me.Start(*ex) && me.StepWhile(*ex, [](int64_t s) { return s < kSteps; })) me.Finish(*ex);
  });
  for (auto& t : threads) t.join();

  for (const Rank& r : ranks) {
    ASSERT_TRUE(r.status.ok()) << "worker-" << r.index << ": " << r.status << "\n" << r.log.All();
  }
  ExpectWorld(ranks[0], 3, 2, 1, 0, 0);
  ExpectWorld(ranks[1], 3, 2, 1, 0, 0);
  // The joiner exports the world it joined; the changes are those a rank
  // saw as a member, and it was none of generation 1's.
  ExpectWorld(ranks[2], 3, 2, 0, 0, 0);
  for (const char* name : {"worker-0", "worker-1", "worker-2"}) {
    EXPECT_EQ(Member(*ranks[0].metrics, name), 1) << name;
    EXPECT_EQ(Member(*ranks[2].metrics, name), std::nullopt) << "only rank 0 names members";
  }
}

TEST(MembershipMetrics, AGenerationThatFormedButCouldNotConnectStillCountsItsChanges) {
  // worker-0 and worker-1 (elastic, 2..3) train; a replica the test plays
  // with a bare rendezvous client joins as worker-2, so generation 2 forms
  // with three, and leaves before it ever connects its ring: the others'
  // links of generation 2 never form, and they form generation 3 without
  // it. Generation 2 counts one joined, generation 3 one left.
  const int port = FreePort();
  std::vector<Rank> ranks(2);
  std::atomic<int> trained{0};
  std::vector<std::thread> threads;
  TrainTwo(
      ranks, port, trained,
      [](AllreduceExchange& x, int64_t s) { return x.generation() < 3 || s < kSteps; }, threads);

  // worker-2's data plane: worker-1 (its left neighbour) dials it.
  absl::StatusOr<exchange::TcpListener> data = exchange::TcpListener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(data.ok()) << data.status();
  RendezvousClientOptions co;
  co.address = absl::StrCat("127.0.0.1:", port);
  co.token = "job-token";
  co.rank = 2;
  co.world_size = 2;
  co.name = "worker-2";
  co.rank0_name = "worker-0";
  co.data_address = absl::StrCat("127.0.0.1:", data->port());
  co.incarnation = 777;
  co.join_timeout_seconds = 30;
  co.heartbeat_seconds = 0.05;
  RendezvousClient joiner(co, ExchangeTestClock(), [](const std::string&) {});
  absl::StatusOr<v1::JoinResponse> g2 = joiner.Join(-1, 0);
  ASSERT_TRUE(g2.ok()) << g2.status();
  ASSERT_EQ(g2->generation_number(), 2u);
  ASSERT_EQ(g2->ranks_size(), 3);
  ASSERT_EQ(g2->ranks(2).name(), "worker-2");

  // Both others hold generation 2 before it ends: worker-1 dials this
  // replica, and worker-0 refuses this replica's call with another job's
  // token.
  const absl::Time until = absl::Now() + absl::Seconds(30);
  auto in_time = [until]() -> absl::Status {
    return absl::Now() < until ? absl::OkStatus() : absl::DeadlineExceededError("30 s passed");
  };
  absl::StatusOr<exchange::TcpConnection> from_worker_1 = data->Accept(30, in_time);
  ASSERT_TRUE(from_worker_1.ok()) << from_worker_1.status();
  ASSERT_TRUE(ReceiveHandshake(*from_worker_1, 1, g2->generation(), "job-token", in_time).ok());
  absl::StatusOr<exchange::TcpConnection> to_worker_0 =
      exchange::TcpConnection::Connect(g2->ranks(0).data_address(), 30, in_time);
  ASSERT_TRUE(to_worker_0.ok()) << to_worker_0.status();
  ASSERT_TRUE(SendHandshake(*to_worker_0, 2, g2->generation(), "another-job", in_time).ok());
  ASSERT_TRUE(WaitFor([&] { return ranks[0].log.Has("refused a data-plane connection"); },
                      absl::Seconds(30)))
      << ranks[0].log.All();

  joiner.StartHeartbeats(g2->generation(), 2);
  joiner.Leave("stopped by signal 15 (Terminated)");
  joiner.StopHeartbeats();
  for (auto& t : threads) t.join();

  for (const Rank& r : ranks) {
    ASSERT_TRUE(r.status.ok()) << "worker-" << r.index << ": " << r.status << "\n" << r.log.All();
    EXPECT_TRUE(r.log.Has("forming generation 2 failed")) << r.log.All();
    EXPECT_TRUE(r.log.Has("generation 3 formed")) << r.log.All();
    ExpectWorld(r, 2, 3, /*joined=*/1, /*left=*/1, /*lost=*/0);
  }
  EXPECT_EQ(Member(*ranks[0].metrics, "worker-2"), std::nullopt);
}

}  // namespace
}  // namespace kubetrain::allreduce
