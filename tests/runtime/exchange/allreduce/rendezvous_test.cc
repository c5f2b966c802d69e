// The allreduce rendezvous: the world forms in rank order with every data
// address; a missing rank is named after the join timeout; a wrong token is
// refused; a rank that restarts after the world formed, a rank that stops
// heartbeating and a reported lost peer each abort the generation with one
// reason that every rank sees.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/rendezvous_client.h"
#include "runtime/exchange/allreduce/rendezvous_incomplete.h"
#include "runtime/exchange/allreduce/rendezvous_server.h"
#include "runtime/exchange/grpc_util.h"
#include "tests/support/wait_for.h"

namespace kubetrain::allreduce {
namespace {

using ::testing::HasSubstr;

struct World {
  std::unique_ptr<RendezvousServer> server;
  std::vector<std::unique_ptr<RendezvousClient>> clients;
};

RealClock& TheClock() {
  static RealClock clock;
  return clock;
}

World Make(int n, double join_timeout, double peer_timeout = 30, const std::string& token = "t") {
  World w;
  RendezvousServerOptions so;
  so.listen_address = "127.0.0.1:0";
  for (int i = 0; i < n; ++i) so.names.push_back(absl::StrCat("worker-", i));
  so.token = token;
  so.generation = 77;
  so.nccl_unique_id = "id";
  so.join_timeout_seconds = join_timeout;
  so.peer_timeout_seconds = peer_timeout;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> s = RendezvousServer::Start(so, TheClock());
  EXPECT_TRUE(s.ok()) << s.status();
  w.server = *std::move(s);
  for (int i = 0; i < n; ++i) {
    RendezvousClientOptions co;
    co.address = absl::StrCat("127.0.0.1:", w.server->port());
    co.token = token;
    co.rank = i;
    co.world_size = n;
    co.name = absl::StrCat("worker-", i);
    co.rank0_name = "worker-0";
    co.data_address = absl::StrCat("host-", i, ":", 5000 + i);
    co.incarnation = 100 + i;
    co.join_timeout_seconds = join_timeout;
    co.peer_timeout_seconds = peer_timeout;
    co.heartbeat_seconds = 0.05;
    w.clients.push_back(
        std::make_unique<RendezvousClient>(co, TheClock(), [](const std::string&) {}));
  }
  return w;
}

std::vector<absl::StatusOr<v1::JoinResponse>> JoinAll(World& w, int count) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(count, absl::UnknownError("not run"));
  std::vector<std::thread> t;
  for (int i = 0; i < count; ++i) t.emplace_back([&, i] { out[i] = w.clients[i]->Join(); });
  for (auto& th : t) th.join();
  return out;
}

TEST(Rendezvous, TheWorldFormsInRankOrder) {
  World w = Make(3, 20);
  auto joined = JoinAll(w, 3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(joined[i].ok()) << joined[i].status();
    EXPECT_EQ(joined[i]->generation(), 77u);
    EXPECT_EQ(joined[i]->nccl_unique_id(), "id");
    ASSERT_EQ(joined[i]->ranks_size(), 3);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(joined[i]->ranks(r).rank(), r);
      EXPECT_EQ(joined[i]->ranks(r).name(), absl::StrCat("worker-", r));
      EXPECT_EQ(joined[i]->ranks(r).data_address(), absl::StrCat("host-", r, ":", 5000 + r));
    }
  }
}

TEST(Rendezvous, AMissingRankIsNamedAfterTheTimeout) {
  World w = Make(3, 1.0);
  auto joined = JoinAll(w, 2);  // worker-2 never comes
  for (int i = 0; i < 2; ++i) {
    ASSERT_FALSE(joined[i].ok());
    EXPECT_EQ(joined[i].status().code(), absl::StatusCode::kUnavailable);  // retryable
    EXPECT_THAT(std::string(joined[i].status().message()), HasSubstr("missing: worker-2"));
  }
}

// The mark, not the words: a deadline whose text says "missing" is no
// rendezvous timeout, and the mark survives the gRPC status.
TEST(Rendezvous, TheServersTimeoutIsTypedNotWorded) {
  EXPECT_FALSE(IsRendezvousIncomplete(absl::DeadlineExceededError("missing: worker-2")));
  const absl::Status marked = RendezvousIncompleteError("did not form", "worker-2");
  EXPECT_TRUE(IsRendezvousIncomplete(marked));
  EXPECT_TRUE(IsRendezvousIncomplete(exchange::FromGrpc(exchange::ToGrpc(marked))));
}

TEST(Rendezvous, AWrongTokenIsRefused) {
  World w = Make(1, 5);
  RendezvousClientOptions co;
  co.address = absl::StrCat("127.0.0.1:", w.server->port());
  co.token = "not-the-token";
  co.world_size = 1;
  co.name = "worker-0";
  co.join_timeout_seconds = 5;
  RendezvousClient intruder(co, TheClock(), [](const std::string&) {});
  absl::StatusOr<v1::JoinResponse> r = intruder.Join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("job token"));
}

TEST(Rendezvous, ARestartedRankAbortsTheGenerationForEveryone) {
  World w = Make(2, 20);
  auto joined = JoinAll(w, 2);
  ASSERT_TRUE(joined[0].ok() && joined[1].ok());
  w.clients[0]->StartHeartbeats(77);
  // worker-1 comes back as a new process (another incarnation).
  RendezvousClientOptions co;
  co.address = absl::StrCat("127.0.0.1:", w.server->port());
  co.token = "t";
  co.rank = 1;
  co.world_size = 2;
  co.name = "worker-1";
  co.incarnation = 999;
  co.join_timeout_seconds = 0.5;
  RendezvousClient restarted(co, TheClock(), [](const std::string&) {});
  EXPECT_FALSE(restarted.Join().ok());
  ASSERT_TRUE(
      testing_util::WaitFor([&] { return !w.clients[0]->AbortStatus().ok(); }, absl::Seconds(10)));
  EXPECT_THAT(std::string(w.clients[0]->AbortStatus().message()), HasSubstr("worker-1 restarted"));
  EXPECT_EQ(w.clients[0]->lost_rank(), 1);
}

TEST(Rendezvous, ASilentRankIsDeclaredLost) {
  World w = Make(3, 20, /*peer_timeout=*/0.5);
  auto joined = JoinAll(w, 3);
  for (auto& j : joined) ASSERT_TRUE(j.ok());
  w.clients[0]->StartHeartbeats(77);
  w.clients[1]->StartHeartbeats(77);  // worker-2 never heartbeats
  ASSERT_TRUE(
      testing_util::WaitFor([&] { return !w.clients[1]->AbortStatus().ok(); }, absl::Seconds(10)));
  EXPECT_THAT(std::string(w.clients[1]->AbortStatus().message()), HasSubstr("lost worker-2"));
  EXPECT_EQ(w.clients[1]->lost_rank(), 2);
}

TEST(Rendezvous, TheFirstReportedLossIsTheOneEveryRankGives) {
  World w = Make(3, 20);
  auto joined = JoinAll(w, 3);
  for (auto& j : joined) ASSERT_TRUE(j.ok());
  for (auto& c : w.clients) c->StartHeartbeats(77);
  absl::Status first = w.clients[1]->ReportAbort(2, "lost worker-2: connection reset");
  // worker-0 saw its neighbour (worker-1) close as a consequence.
  absl::Status second = w.clients[0]->ReportAbort(1, "lost worker-1: peer closed");
  EXPECT_EQ(first.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(first.message()), HasSubstr("worker-2"));
  EXPECT_THAT(std::string(second.message()), HasSubstr("lost worker-2: connection reset"));
  ASSERT_TRUE(
      testing_util::WaitFor([&] { return !w.clients[2]->AbortStatus().ok(); }, absl::Seconds(10)));
  EXPECT_THAT(std::string(w.clients[2]->AbortStatus().message()), HasSubstr("worker-2"));
}

TEST(Rendezvous, HeartbeatsCarryEveryRanksProgress) {
  World w = Make(2, 20);
  auto joined = JoinAll(w, 2);
  ASSERT_TRUE(joined[0].ok() && joined[1].ok());
  w.clients[1]->SetProgress(5, 4);
  w.clients[0]->StartHeartbeats(77);
  w.clients[1]->StartHeartbeats(77);
  ASSERT_TRUE(testing_util::WaitFor(
      [&] {
        auto peers = w.clients[0]->Peers();
        return peers.size() == 2 && peers[1].collectives_started == 5;
      },
      absl::Seconds(10)));
  EXPECT_EQ(w.clients[0]->Peers()[1].name, "worker-1");
}

}  // namespace
}  // namespace kubetrain::allreduce
