// The server side of a PS step without a transport: each refusal with its
// typed status and counted reason, nothing committed on any error (the
// slot free for the retry), a good push committed and read back at its
// version, duplicates, PushPull's pull check and pipelined rounds.
#include "runtime/exchange/ps/shard_session.h"

#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/metrics/metric_names.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {
namespace {

using metrics::RejectReason;
using ::testing::HasSubstr;

constexpr int64_t kParams = 1000;
constexpr uint64_t kIncarnation = 77;
constexpr float kLr = 0.5f;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// A shard with a fake clock, its metrics and the session over them.
// `registered`: every worker registered and the parameters initialised to 1.
class Fixture {
 public:
  explicit Fixture(const std::string& mode, int num_workers = 1, bool pipeline = false,
                   int64_t params = kParams, bool registered = true)
      : params_(params), metrics_(Options()) {
    PsShardOptions o;
    o.num_workers = num_workers;
    o.mode = *ExchangeMode::Parse(mode);
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = 0;
    o.lr.base_lr = kLr;
    o.incarnation = kIncarnation;
    o.pipeline = pipeline;
    shard_ = std::make_unique<PsShard>(
        o, clock_, [](const std::string&) {}, &metrics_);
    session_ = std::make_unique<ShardSession>(*shard_, "t", &metrics_);
    if (!registered) return;
    for (int w = 0; w < num_workers; ++w) {
      EXPECT_TRUE(shard_->Register(w, params, "").ok());
    }
    PushHead init = Head(0);
    init.initialize = true;
    init.total_steps = 10;
    absl::StatusOr<PushAnswer> a = PushWhole(init, std::vector<float>(params, 1.0f));
    EXPECT_TRUE(a.ok() && a->accepted) << a.status();
  }

  PushHead Head(int worker, int64_t step = 0) const {
    PushHead h;
    h.worker = worker;
    h.step = step;
    h.incarnation = kIncarnation;
    return h;
  }

  // A push of `values` in chunks of `chunk`, each arriving checked.
  absl::StatusOr<PushAnswer> PushWhole(const PushHead& head, const std::vector<float>& values,
                                       int64_t chunk = 400) {
    absl::StatusOr<StagedPush> push = session_->BeginPush(head);
    if (!push.ok()) return push.status();
    for (int64_t off = 0; off < static_cast<int64_t>(values.size()); off += chunk) {
      const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(values.size()) - off);
      absl::StatusOr<std::span<float>> to = push->Place(off, n);
      if (!to.ok()) return to.status();
      int64_t nonfinite = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!to->empty()) (*to)[i] = values[off + i];
        nonfinite += std::isfinite(values[off + i]) ? 0 : 1;
      }
      if (absl::Status s = push->Arrived(nonfinite, n * 4); !s.ok()) return s;
    }
    return push->Commit();
  }

  // The parameters as a worker's read sees them.
  std::vector<float> Params(uint64_t* version = nullptr) {
    std::vector<float> out;
    PullAsk ask;
    ask.worker = kObserver;
    absl::StatusOr<PullResult> r = session_->Read(
        ask, [&](std::span<const float> p, const PullResult&) { out.assign(p.begin(), p.end()); },
        nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (version != nullptr && r.ok()) *version = r->version;
    return out;
  }

  double Rejected(RejectReason reason) const {
    return Counter(metrics::kRejectedPushes.name, metrics::kLabelReason,
                   metrics::RejectReasonName(reason));
  }
  double Received() const {
    return Counter(metrics::kExchangeReceivedBytes.name, metrics::kLabelPeerRole, "worker");
  }
  double Sent(const char* role) const {
    return Counter(metrics::kExchangeSentBytes.name, metrics::kLabelPeerRole, role);
  }

  PsShard& shard() { return *shard_; }
  ShardSession& session() { return *session_; }
  int64_t params() const { return params_; }

 private:
  static metrics::RuntimeMetricsOptions Options() {
    metrics::RuntimeMetricsOptions o;
    o.ps_server = true;
    return o;
  }
  double Counter(const std::string& family, const std::string& label,
                 const std::string& value) const {
    double sum = 0;
    for (const prometheus::MetricFamily& f : metrics_.registry()->Collect()) {
      if (f.name != family) continue;
      for (const prometheus::ClientMetric& c : f.metric) {
        for (const prometheus::ClientMetric::Label& l : c.label) {
          if (l.name == label && l.value == value) sum += c.counter.value;
        }
      }
    }
    return sum;
  }

  const int64_t params_;
  FakeClock clock_;
  metrics::RuntimeMetrics metrics_;
  std::unique_ptr<PsShard> shard_;
  std::unique_ptr<ShardSession> session_;
};

TEST(ShardSession, AdmitsWritersByTokenAndCountsStrangers) {
  Fixture f("async");
  EXPECT_TRUE(f.session().AdmitWriter("t", "push from a").ok());
  absl::Status s = f.session().AdmitWriter("other", "push from b");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(f.Rejected(RejectReason::kBadToken), 1);
  // A reader with a wrong token is refused but is no rejected push.
  EXPECT_EQ(f.session().AdmitReader("").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(f.session().AdmitReader("t").ok());
  EXPECT_EQ(f.Rejected(RejectReason::kBadToken), 1);
}

TEST(ShardSession, AdmitsAConnectionOfThisIncarnationFromATrainingReplica) {
  Fixture f("async", 2);
  EXPECT_TRUE(f.session().AdmitConnection(1, kIncarnation, "t").ok());
  absl::Status s = f.session().AdmitConnection(1, kIncarnation, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(f.Rejected(RejectReason::kBadToken), 1);
  s = f.session().AdmitConnection(1, kIncarnation + 1, "t");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kStaleIncarnation);
  for (int worker : {2, kObserver}) {
    s = f.session().AdmitConnection(worker, kIncarnation, "t");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(s), HasSubstr("unknown worker id"));
  }
}

// Each refusal of a push's head: its code, typed refusal and counted
// reason; none commits anything or holds the slot.
struct HeadCase {
  const char* name;
  void (*edit)(PushHead&);
  absl::StatusCode code;
  PsRefusal refusal;
  std::optional<RejectReason> counted;
  const char* says;
};

class HeadRefusals : public ::testing::TestWithParam<HeadCase> {};

TEST_P(HeadRefusals, AreTypedCountedAndCommitNothing) {
  const HeadCase& c = GetParam();
  Fixture f("async", 2);
  uint64_t before = 0;
  const std::vector<float> params = f.Params(&before);
  PushHead head = f.Head(0);
  c.edit(head);
  absl::StatusOr<StagedPush> push = f.session().BeginPush(head);
  ASSERT_FALSE(push.ok());
  EXPECT_EQ(push.status().code(), c.code) << push.status();
  EXPECT_EQ(PsRefusalOf(push.status()), c.refusal);
  EXPECT_THAT(Msg(push.status()), HasSubstr(c.says));
  for (RejectReason r : {RejectReason::kBadHeader, RejectReason::kUnknownWorker,
                         RejectReason::kBadRange, RejectReason::kBadChunk}) {
    EXPECT_EQ(f.Rejected(r), c.counted == r ? 1 : 0) << metrics::RejectReasonName(r);
  }
  uint64_t after = 0;
  EXPECT_EQ(f.Params(&after), params);
  EXPECT_EQ(after, before);
  // The slot is free: the worker's good push goes through.
  absl::StatusOr<PushAnswer> good = f.PushWhole(f.Head(0), std::vector<float>(f.params(), 0.5f));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->accepted);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HeadRefusals,
    ::testing::Values(
        HeadCase{"StaleIncarnation", [](PushHead& h) { h.incarnation = kIncarnation + 1; },
                 absl::StatusCode::kFailedPrecondition, PsRefusal::kStaleIncarnation, std::nullopt,
                 "re-register"},
        HeadCase{"UnknownWorker", [](PushHead& h) { h.worker = 9; },
                 absl::StatusCode::kInvalidArgument, PsRefusal::kNone, RejectReason::kUnknownWorker,
                 "unknown worker id 9"},
        HeadCase{"AnotherWorkersConnection", [](PushHead& h) { h.connection_worker = 1; },
                 absl::StatusCode::kInvalidArgument, PsRefusal::kNone, RejectReason::kBadHeader,
                 "a step of worker 0 on the connection of worker 1"},
        HeadCase{"WrongExtent",
                 [](PushHead& h) {
                   h.extent = Range{16, kParams};
                 },
                 absl::StatusCode::kInvalidArgument, PsRefusal::kNone, RejectReason::kBadRange,
                 "push of [16, 1016) does not fit: shard 0 owns [0, 1000)"},
        HeadCase{"ShortExtent",
                 [](PushHead& h) {
                   h.extent = Range{0, kParams - 1};
                 },
                 absl::StatusCode::kInvalidArgument, PsRefusal::kNone, RejectReason::kBadRange,
                 "does not fit"},
        HeadCase{"PipelinedToAShardThatDoesNot", [](PushHead& h) { h.pipelined = true; },
                 absl::StatusCode::kFailedPrecondition, PsRefusal::kNone, std::nullopt,
                 "--ps-pipeline"}),
    [](const ::testing::TestParamInfo<HeadCase>& i) { return std::string(i.param.name); });

TEST(ShardSession, APushBeforeInitialisationIsToldSoTyped) {
  Fixture f("async", 1, false, kParams, /*registered=*/false);
  ASSERT_TRUE(f.shard().Register(0, kParams, "").ok());
  absl::StatusOr<StagedPush> push = f.session().BeginPush(f.Head(0));
  EXPECT_EQ(push.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(push.status()), PsRefusal::kUninitialised);
}

// Each way a push can go bad after its head: its status and counted
// reason, nothing committed, the slot free for the retry.
TEST(ShardSession, ABadPushCommitsNothingAndFreesTheSlot) {
  Fixture f("async");
  uint64_t version = 0;
  const std::vector<float> params = f.Params(&version);
  const std::vector<float> g(kParams, 0.5f);
  auto bad = [&](auto&& go, absl::StatusCode code, std::optional<RejectReason> counted,
                 const std::string& says) {
    SCOPED_TRACE(says);
    const double before = counted ? f.Rejected(*counted) : 0;
    absl::StatusOr<StagedPush> push = f.session().BeginPush(f.Head(0));
    ASSERT_TRUE(push.ok()) << push.status();
    absl::Status s = go(*push);
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(Msg(s), HasSubstr(says));
    // The failure sticks: nothing more is taken and Commit commits nothing.
    EXPECT_EQ(push->Commit().status(), s);
    EXPECT_EQ(push->Place(0, 1).status(), s);
    if (counted) {
      EXPECT_EQ(f.Rejected(*counted), before + 1);
    }
    {
      // The slot is free already, before the transport answers: the
      // worker's retry may come as soon as it hears why.
      absl::StatusOr<StagedPush> retry = f.session().BeginPush(f.Head(0));
      EXPECT_TRUE(retry.ok()) << retry.status();
    }
    uint64_t now = 0;
    EXPECT_EQ(f.Params(&now), params);
    EXPECT_EQ(now, version);
    EXPECT_EQ(f.shard().global_step(), 0);
  };
  bad([](StagedPush& p) { return p.Place(16, 100).status(); }, absl::StatusCode::kInvalidArgument,
      RejectReason::kBadRange,
      "chunk [16, 116) does not fit: shard 0 owns [0, 1000) and expected offset 0");
  bad(
      [](StagedPush& p) {
        EXPECT_TRUE(p.Place(0, 600).ok());
        return p.Place(600, 600).status();
      },
      absl::StatusCode::kInvalidArgument, RejectReason::kBadRange, "does not fit");
  bad([](StagedPush& p) { return p.Place(0, 0).status(); }, absl::StatusCode::kInvalidArgument,
      RejectReason::kBadRange, "does not fit");
  bad(
      [](StagedPush& p) {
        EXPECT_TRUE(p.Place(0, 900).ok());
        EXPECT_TRUE(p.Arrived(0, 3600).ok());
        return p.Commit().status();
      },
      absl::StatusCode::kInvalidArgument, RejectReason::kBadRange,
      "push covers 900 of the 1000 elements shard 0 owns");
  bad(
      [](StagedPush& p) {
        EXPECT_TRUE(p.Place(0, kParams).ok());
        EXPECT_TRUE(p.Arrived(0, 4000).ok());
        return p.CheckCrc(0x1234, 0x4321);
      },
      absl::StatusCode::kDataLoss, RejectReason::kBadChunk,
      "push of worker 0 step 0 failed its checksum (CRC-32C 1234, sent 4321): nothing applied");
  bad(
      [](StagedPush& p) {
        EXPECT_TRUE(p.Place(0, 100).ok());
        return p.Fail(absl::UnavailableError("connection lost"), std::nullopt);
      },
      absl::StatusCode::kUnavailable, std::nullopt, "connection lost");
  bad(
      [&](StagedPush& p) {
        absl::StatusOr<std::span<float>> to = p.Place(0, kParams);
        EXPECT_TRUE(to.ok());
        std::fill(to->begin(), to->end(), 0.5f);
        (*to)[17] = std::nanf("");
        EXPECT_TRUE(p.Arrived(1, 4000).ok());
        return p.Commit().status();
      },
      absl::StatusCode::kInvalidArgument, RejectReason::kNonFinite, "1 NaN/Inf values");
  // A broken connection is not counted as a rejection.
  EXPECT_EQ(f.shard().Status().rejected_pushes(), 6);
  // The slot was released every time: the retry commits.
  absl::StatusOr<PushAnswer> good = f.PushWhole(f.Head(0), g);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->accepted);
  EXPECT_EQ(good->global_step, 1);
}

TEST(ShardSession, AnAbandonedPushCommitsNothing) {
  Fixture f("async");
  {
    absl::StatusOr<StagedPush> push = f.session().BeginPush(f.Head(0));
    ASSERT_TRUE(push.ok());
    absl::StatusOr<std::span<float>> to = push->Place(0, kParams);
    ASSERT_TRUE(to.ok());
    std::fill(to->begin(), to->end(), 0.5f);
    ASSERT_TRUE(push->Arrived(0, 4000).ok());
  }  // dropped before Commit: a transport that returned early
  EXPECT_EQ(f.shard().global_step(), 0);
  EXPECT_EQ(f.Params(), std::vector<float>(kParams, 1.0f));
  EXPECT_TRUE(f.PushWhole(f.Head(0), std::vector<float>(kParams, 0.5f)).ok());
}

TEST(ShardSession, APushPullStepEndsWithThePullOfItsOwnWorker) {
  Fixture f("async", 2);
  PushHead head = f.Head(0);
  head.ends_with_pull = true;
  const std::vector<float> g(kParams, 0.5f);
  absl::StatusOr<PushAnswer> a = f.PushWhole(head, g);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(a.status()), HasSubstr("a PushPull step ended without its pull request"));
  EXPECT_EQ(f.Rejected(RejectReason::kBadHeader), 1);

  absl::StatusOr<StagedPush> push = f.session().BeginPush(head);
  ASSERT_TRUE(push.ok());
  ASSERT_TRUE(push->Place(0, kParams).ok());
  ASSERT_TRUE(push->Arrived(0, 4000).ok());
  push->PullArrived(1);
  EXPECT_THAT(Msg(push->Commit().status()),
              HasSubstr("PushPull step of worker 0 asks to pull for worker 1"));
  EXPECT_EQ(f.Rejected(RejectReason::kBadHeader), 2);
  push->Release();
  EXPECT_EQ(f.shard().global_step(), 0);

  absl::StatusOr<StagedPush> retry = f.session().BeginPush(head);
  ASSERT_TRUE(retry.ok());
  absl::StatusOr<std::span<float>> to = retry->Place(0, kParams);
  ASSERT_TRUE(to.ok());
  std::copy(g.begin(), g.end(), to->begin());
  ASSERT_TRUE(retry->Arrived(0, 4000).ok());
  retry->PullArrived(0);
  absl::StatusOr<PushAnswer> good = retry->Commit();
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->global_step, 1);
}

TEST(ShardSession, AGoodPushCommitsAndReadsReturnItsVersion) {
  Fixture f("async");
  uint64_t v0 = 0;
  ASSERT_EQ(f.Params(&v0), std::vector<float>(kParams, 1.0f));
  const double received = f.Received();
  absl::StatusOr<PushAnswer> a = f.PushWhole(f.Head(0), std::vector<float>(kParams, 0.5f));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->accepted);
  EXPECT_EQ(a->global_step, 1);
  EXPECT_EQ(a->incarnation, kIncarnation);
  EXPECT_EQ(f.Received(), received + kParams * 4);

  PullAsk ask;
  ask.worker = 0;
  ask.incarnation = kIncarnation;
  ask.min_step = 1;
  ask.clock = 1;
  std::vector<float> read;
  absl::StatusOr<PullResult> r = f.session().Read(
      ask, [&](std::span<const float> p, const PullResult&) { read.assign(p.begin(), p.end()); },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step, 1);
  EXPECT_GT(r->version, v0);
  EXPECT_EQ(read, std::vector<float>(kParams, 1.0f - kLr * 0.5f));

  // Pinned, the same version, unchanged by the next update while held.
  absl::StatusOr<PinnedParams> pinned = f.session().ReadPinned(ask, nullptr);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->result.version, r->version);
  ASSERT_NE(pinned->result.pin, nullptr);
  ASSERT_TRUE(f.PushWhole(f.Head(0, 1), std::vector<float>(kParams, 1.0f)).ok());
  EXPECT_EQ(std::vector<float>(pinned->values.begin(), pinned->values.end()), read);
  uint64_t v2 = 0;
  EXPECT_EQ(f.Params(&v2), std::vector<float>(kParams, 1.0f - kLr * 0.5f - kLr * 1.0f));
  EXPECT_GT(v2, r->version);

  f.session().CountSent(0, 4000);
  f.session().CountSent(kObserver, 2000);
  EXPECT_EQ(f.Sent("worker"), 4000);
  EXPECT_EQ(f.Sent("evaluator"), 2000);
}

TEST(ShardSession, ADuplicatePushIsDroppedAndAnsweredNotAccepted) {
  Fixture f("sync", 2);
  const std::vector<float> g(kParams, 0.5f);
  absl::StatusOr<PushAnswer> first = f.PushWhole(f.Head(0), g);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->accepted);
  EXPECT_EQ(first->global_step, 0);  // waiting for worker 1

  // The retry of a push already taken: read and dropped, from a whole
  // stream without reading it (Drop) or with its chunks.
  absl::StatusOr<StagedPush> again = f.session().BeginPush(f.Head(0));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate());
  EXPECT_FALSE(again->Drop().accepted);
  absl::StatusOr<std::span<float>> to = again->Place(0, kParams);
  ASSERT_TRUE(to.ok());
  EXPECT_TRUE(to->empty()) << "a duplicate's values go nowhere";
  ASSERT_TRUE(again->Arrived(kParams, 4000).ok()) << "not looked at";
  absl::StatusOr<PushAnswer> a = again->Commit();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->accepted);
  EXPECT_EQ(f.shard().Status().stale_pushes(), 1);
  EXPECT_EQ(f.shard().Status().rejected_pushes(), 0);

  absl::StatusOr<PushAnswer> other = f.PushWhole(f.Head(1), g);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->global_step, 1);
  EXPECT_EQ(f.Params(), std::vector<float>(kParams, 1.0f - kLr * 0.5f));
}

TEST(ShardSession, ReadRefusalsAreTyped) {
  Fixture f("async", 2);
  PullAsk ask;
  ask.worker = 0;
  ask.incarnation = kIncarnation + 1;
  const auto read = [&](const PullAsk& a) {
    return f.session()
        .Read(
            a, [](std::span<const float>, const PullResult&) {}, nullptr)
        .status();
  };
  absl::Status s = read(ask);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(s), PsRefusal::kStaleIncarnation);
  ask.incarnation = 0;  // callers from before incarnations are not checked
  EXPECT_TRUE(read(ask).ok());
  ask.worker = 2;
  EXPECT_EQ(read(ask).code(), absl::StatusCode::kInvalidArgument);
  ask.worker = -2;
  EXPECT_THAT(Msg(read(ask)), HasSubstr("unknown worker id -2"));

  Fixture empty("async", 1, false, kParams, /*registered=*/false);
  PullAsk any;
  s = empty.session()
          .Read(
              any, [](std::span<const float>, const PullResult&) {}, nullptr)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s), HasSubstr("no layout yet"));
}

// A pipelined push: chunks go to the shard as they arrive; a corrupt one
// takes back those already applied, and the retry's round commits.
TEST(ShardSession, APipelinedPushThatBreaksRollsItsRoundBack) {
  constexpr int64_t kN = 40000;  // three chunks
  const int64_t chunk = data_plane::ChunkValues(kN);
  ASSERT_EQ(data_plane::NumChunks(kN), 3);
  Fixture f("sync", 1, /*pipeline=*/true, kN);
  ASSERT_TRUE(f.shard().pipelined());
  PushHead head = f.Head(0);
  head.pipelined = true;
  head.extent = Range{0, kN};
  auto place = [&](StagedPush& p, int64_t index, float value) {
    const int64_t n = std::min(chunk, kN - index * chunk);
    absl::StatusOr<std::span<float>> to = p.Place(index * chunk, n);
    EXPECT_TRUE(to.ok()) << to.status();
    if (to.ok()) std::fill(to->begin(), to->end(), value);
    return n;
  };
  {
    absl::StatusOr<StagedPush> push = f.session().BeginPush(head);
    ASSERT_TRUE(push.ok()) << push.status();
    ASSERT_TRUE(push->Arrived(0, place(*push, 0, 0.5f) * 4).ok());
    place(*push, 1, 0.5f);
    absl::Status s = push->CheckCrc(1, 2);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(Msg(s), HasSubstr("push of worker 0 step 0 chunk 1 failed its checksum"));
    EXPECT_EQ(f.Rejected(RejectReason::kBadChunk), 1);
  }
  EXPECT_EQ(f.shard().global_step(), 0);
  EXPECT_EQ(f.Params(), std::vector<float>(kN, 1.0f));

  absl::StatusOr<StagedPush> push = f.session().BeginPush(head);
  ASSERT_TRUE(push.ok()) << push.status();
  for (int64_t i = 0; i < 3; ++i) ASSERT_TRUE(push->Arrived(0, place(*push, i, 0.5f) * 4).ok());
  ASSERT_TRUE(push->Commit().ok());
  absl::StatusOr<RoundRead> round = f.session().WaitRound(0, 0, 0, 0, nullptr);
  push->Release();
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_TRUE(round->committed);
  EXPECT_EQ(round->global_step, 1);
  EXPECT_EQ(std::vector<float>(round->values.begin(), round->values.end()),
            std::vector<float>(kN, 1.0f - kLr * 0.5f));
}

TEST(ShardSession, AStalePipelinedChunkWithNanIsRefused) {
  constexpr int64_t kN = 40000;
  const int64_t chunk = data_plane::ChunkValues(kN);
  Fixture f("sync", 1, /*pipeline=*/true, kN);
  PushHead head = f.Head(0);
  head.pipelined = true;
  ASSERT_TRUE(f.PushWhole(head, std::vector<float>(kN, 0.5f), chunk).ok());
  EXPECT_EQ(f.shard().global_step(), 1);
  // Step 0 again, now over: its values are dropped but still checked.
  absl::StatusOr<StagedPush> stale = f.session().BeginPush(head);
  ASSERT_TRUE(stale.ok()) << stale.status();
  ASSERT_FALSE(stale->duplicate());
  ASSERT_TRUE(stale->Place(0, chunk).ok());
  ASSERT_TRUE(stale->Arrived(0, chunk * 4).ok());
  absl::StatusOr<std::span<float>> to = stale->Place(chunk, chunk);
  ASSERT_TRUE(to.ok());
  EXPECT_TRUE(to->empty()) << "a stale push's values are dropped";
  absl::Status s = stale->Arrived(3, chunk * 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("has 3 NaN/Inf values in chunk 1"));
  EXPECT_EQ(f.Rejected(RejectReason::kNonFinite), 1);
  EXPECT_EQ(f.shard().global_step(), 1);
}

}  // namespace
}  // namespace kubetrain::ps
