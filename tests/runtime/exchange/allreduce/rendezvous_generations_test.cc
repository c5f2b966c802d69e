// The rendezvous' generations (reform): a restarted, lost or leaving rank
// ends the running generation; the next forms once whom it waits for has
// joined again (a fixed world: every index; an elastic one: the survivors and
// the joiners, at least min_world), numbered one more, naming the member with
// the newest state and what changed. A new host (worker 0 replaced) takes
// the survivors' generation and state.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/rendezvous_client.h"
#include "runtime/exchange/allreduce/rendezvous_server.h"
#include "tests/support/wait_for.h"

namespace kubetrain::allreduce {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RealClock& TheClock() {
  static RealClock clock;
  return clock;
}

struct Options {
  int names = 3;
  int min_world = 0, max_world = 0;
  double join_timeout = 20, peer_timeout = 30;
};

std::unique_ptr<RendezvousServer> StartServer(const Options& o) {
  RendezvousServerOptions so;
  so.listen_address = "127.0.0.1:0";
  for (int i = 0; i < o.names; ++i) so.names.push_back(absl::StrCat("worker-", i));
  so.token = "t";
  so.generation = 500;
  so.nccl_unique_id = "id-1";
  int next = 1;
  so.new_nccl_unique_id = [next]() mutable { return absl::StrCat("id-", ++next); };
  so.join_timeout_seconds = o.join_timeout;
  so.peer_timeout_seconds = o.peer_timeout;
  so.reform = true;
  so.min_world = o.min_world;
  so.max_world = o.max_world;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> s = RendezvousServer::Start(so, TheClock());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::unique_ptr<RendezvousClient> Client(int port, int index, uint64_t incarnation,
                                         const Options& o) {
  RendezvousClientOptions co;
  co.address = absl::StrCat("127.0.0.1:", port);
  co.token = "t";
  co.rank = index;
  co.world_size = o.names;
  co.name = absl::StrCat("worker-", index);
  co.rank0_name = "worker-0";
  co.data_address = absl::StrCat("host-", index, ":", incarnation);
  co.incarnation = incarnation;
  co.join_timeout_seconds = o.join_timeout;
  co.peer_timeout_seconds = o.peer_timeout;
  co.heartbeat_seconds = 0.05;
  return std::make_unique<RendezvousClient>(co, TheClock(), [](const std::string&) {});
}

struct Join {
  int64_t state_step = -1;
  uint64_t last_generation = 0;
};

// Joins every client at once (each with its state), in threads.
std::vector<absl::StatusOr<v1::JoinResponse>> JoinAll(const std::vector<RendezvousClient*>& clients,
                                                      const std::vector<Join>& joins) {
  std::vector<absl::StatusOr<v1::JoinResponse>> out(clients.size(), absl::UnknownError("not run"));
  std::vector<std::thread> t;
  for (size_t i = 0; i < clients.size(); ++i) {
    t.emplace_back(
        [&, i] { out[i] = clients[i]->Join(joins[i].state_step, joins[i].last_generation); });
  }
  for (auto& th : t) th.join();
  return out;
}

// The first generation of a world of three, every member sending heartbeats.
struct FirstGeneration {
  std::unique_ptr<RendezvousServer> server;
  std::vector<std::unique_ptr<RendezvousClient>> c;
  std::vector<absl::StatusOr<v1::JoinResponse>> joined;
};
void FormFirstGeneration(const Options& o, FirstGeneration& w) {
  w.server = StartServer(o);
  ASSERT_NE(w.server, nullptr);
  for (int i = 0; i < 3; ++i) w.c.push_back(Client(w.server->port(), i, 100 + i, o));
  w.joined = JoinAll({w.c[0].get(), w.c[1].get(), w.c[2].get()}, {{}, {}, {}});
  for (auto& j : w.joined) ASSERT_TRUE(j.ok()) << j.status();
  for (int i = 0; i < 3; ++i) w.c[i]->StartHeartbeats(w.joined[i]->generation(), i);
}

std::vector<int> Indexes(const v1::JoinResponse& r) {
  std::vector<int> out;
  for (const v1::RankInfo& i : r.ranks()) out.push_back(i.index());
  return out;
}

TEST(RendezvousGenerations, ARestartedRankEndsTheGenerationAndTheSurvivorsStateIsTheOneTaken) {
  const Options o;
  auto server = StartServer(o);
  std::vector<std::unique_ptr<RendezvousClient>> c;
  for (int i = 0; i < 3; ++i) c.push_back(Client(server->port(), i, 100 + i, o));
  auto first = JoinAll({c[0].get(), c[1].get(), c[2].get()}, {{}, {}, {}});
  for (auto& j : first) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(first[0]->generation_number(), 1u);
  EXPECT_EQ(first[0]->generation(), 500u);
  for (int i = 0; i < 3; ++i) c[i]->StartHeartbeats(first[i]->generation(), i);

  // worker-1 comes back as a new process: everyone learns the generation is
  // over, naming it.
  auto replacement = Client(server->port(), 1, 999, o);
  absl::StatusOr<v1::JoinResponse> joined_again;
  std::thread t([&] { joined_again = replacement->Join(-1, 0); });
  for (int i : {0, 2}) {
    ASSERT_TRUE(
        testing_util::WaitFor([&] { return !c[i]->AbortStatus().ok(); }, absl::Seconds(10)));
    EXPECT_THAT(std::string(c[i]->AbortStatus().message()), HasSubstr("worker-1"));
    c[i]->StopHeartbeats();
  }
  // The survivors join again with their state (step 40 and 41: worker-2
  // finished the step that failed on worker-0).
  auto second = JoinAll({c[0].get(), c[2].get()}, {{40, 1}, {41, 1}});
  t.join();
  ASSERT_TRUE(joined_again.ok()) << joined_again.status();
  for (auto& j : second) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(second[0]->generation_number(), 2u);
  EXPECT_EQ(second[0]->generation(), 501u);
  EXPECT_EQ(second[0]->nccl_unique_id(), "id-2");
  EXPECT_THAT(Indexes(*second[0]), ElementsAre(0, 1, 2));
  EXPECT_EQ(second[0]->ranks(1).incarnation(), 999u);
  EXPECT_EQ(second[0]->state_rank(), 2);  // the newest state
  EXPECT_EQ(joined_again->state_rank(), 2);
  EXPECT_THAT(second[1]->change(), HasSubstr("lost worker-1"));
  EXPECT_EQ(second[1]->lost(), 1);
  EXPECT_EQ(second[1]->joined(), 0);
  EXPECT_EQ(second[1]->left(), 0);
}

TEST(RendezvousGenerations, AFixedWorldWaitsForTheLeaversReplacementAndNamesItWhenItDoesNotCome) {
  Options o;
  o.join_timeout = 1.5;
  FirstGeneration w;
  ASSERT_NO_FATAL_FAILURE(FormFirstGeneration(o, w));
  auto& c = w.c;
  c[2]->Leave("stopped by signal 15");
  ASSERT_TRUE(testing_util::WaitFor([&] { return !c[0]->AbortStatus().ok(); }, absl::Seconds(10)));
  EXPECT_THAT(std::string(c[0]->AbortStatus().message()), HasSubstr("left worker-2"));
  for (auto& x : c) x->StopHeartbeats();
  auto second = JoinAll({c[0].get(), c[1].get()}, {{7, 1}, {7, 1}});
  for (auto& j : second) {
    ASSERT_FALSE(j.ok());
    EXPECT_THAT(std::string(j.status().message()), HasSubstr("missing: worker-2"));
  }
}

TEST(RendezvousGenerations, ARankThatLeftJoinsNoOtherGeneration) {
  Options o;
  o.join_timeout = 60;  // a join that waited for it would fail the test by its timeout
  FirstGeneration w;
  ASSERT_NO_FATAL_FAILURE(FormFirstGeneration(o, w));
  auto& c = w.c;
  // A scale-down's leaver finishes its generation but joins no other.
  c[2]->CancelJoins("scaled down");
  EXPECT_TRUE(c[2]->AbortStatus().ok()) << "its generation goes on";
  c[1]->Leave("stopped by signal 15");
  for (auto& x : c) x->StopHeartbeats();
  for (int i : {1, 2}) {
    absl::StatusOr<v1::JoinResponse> again = c[i]->Join(7, 1);
    ASSERT_FALSE(again.ok());
    EXPECT_TRUE(absl::IsCancelled(again.status())) << again.status();
  }
  // A generation it still takes part in (its answer was on the way) is over
  // for it from the start.
  c[1]->StartHeartbeats(w.joined[1]->generation(), 1);
  EXPECT_THAT(std::string(c[1]->AbortStatus().message()), HasSubstr("worker-1 leaves"));
  c[1]->StopHeartbeats();
}

TEST(RendezvousGenerations, AnElasticWorldGrowsWithAJoinerAndShrinksWithALeaver) {
  Options o;
  o.names = 2;
  o.min_world = 2;
  o.max_world = 4;
  auto server = StartServer(o);
  std::vector<std::unique_ptr<RendezvousClient>> c;
  for (int i = 0; i < 3; ++i) c.push_back(Client(server->port(), i, 100 + i, o));
  auto first = JoinAll({c[0].get(), c[1].get()}, {{}, {}});
  for (auto& j : first) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_THAT(Indexes(*first[0]), ElementsAre(0, 1));
  for (int i = 0; i < 2; ++i) c[i]->StartHeartbeats(first[i]->generation(), i);

  // worker-2 (a scale-up) joins: generation 2 of three.
  absl::StatusOr<v1::JoinResponse> joiner;
  std::thread t([&] { joiner = c[2]->Join(-1, 0); });
  for (int i : {0, 1}) {
    ASSERT_TRUE(
        testing_util::WaitFor([&] { return !c[i]->AbortStatus().ok(); }, absl::Seconds(10)));
    EXPECT_THAT(std::string(c[i]->AbortStatus().message()), HasSubstr("joined worker-2"));
    c[i]->StopHeartbeats();
  }
  auto second = JoinAll({c[0].get(), c[1].get()}, {{12, 1}, {12, 1}});
  t.join();
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  for (auto& j : second) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(joiner->generation_number(), 2u);
  EXPECT_THAT(Indexes(*joiner), ElementsAre(0, 1, 2));
  EXPECT_THAT(joiner->change(), HasSubstr("joined worker-2"));
  EXPECT_EQ(joiner->joined(), 1);
  EXPECT_EQ(joiner->lost(), 0);
  EXPECT_EQ(server->generation_number(), 2u);
  c[0]->StartHeartbeats(second[0]->generation(), 0);
  c[1]->StartHeartbeats(second[1]->generation(), 1);
  c[2]->StartHeartbeats(joiner->generation(), 2);

  // worker-2 leaves (a scale-down): the others form generation 3 without it.
  c[2]->Leave("scaled down");
  for (int i : {0, 1}) {
    ASSERT_TRUE(
        testing_util::WaitFor([&] { return !c[i]->AbortStatus().ok(); }, absl::Seconds(10)));
    c[i]->StopHeartbeats();
  }
  c[2]->StopHeartbeats();
  auto third = JoinAll({c[0].get(), c[1].get()}, {{20, 2}, {20, 2}});
  for (auto& j : third) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(third[0]->generation_number(), 3u);
  EXPECT_THAT(Indexes(*third[0]), ElementsAre(0, 1));
  EXPECT_THAT(third[0]->change(), HasSubstr("left worker-2"));
  EXPECT_THAT(third[0]->change(), HasSubstr("without worker-2"));
  EXPECT_EQ(third[0]->left(), 1);
  EXPECT_EQ(third[0]->lost(), 0);
}

TEST(RendezvousGenerations, AnElasticWorldBelowItsMinimumWaitsAndSaysHowManyItNeeds) {
  Options o;
  o.names = 2;
  o.min_world = 2;
  o.max_world = 3;
  o.join_timeout = 1.5;
  o.peer_timeout = 0.3;  // a member that does not come back is dropped quickly
  auto server = StartServer(o);
  std::vector<std::unique_ptr<RendezvousClient>> c;
  for (int i = 0; i < 2; ++i) c.push_back(Client(server->port(), i, 100 + i, o));
  auto first = JoinAll({c[0].get(), c[1].get()}, {{}, {}});
  for (auto& j : first) ASSERT_TRUE(j.ok()) << j.status();
  c[0]->StartHeartbeats(first[0]->generation(), 0);
  c[1]->StartHeartbeats(first[1]->generation(), 1);
  c[1]->Leave("scaled down");
  ASSERT_TRUE(testing_util::WaitFor([&] { return !c[0]->AbortStatus().ok(); }, absl::Seconds(10)));
  c[0]->StopHeartbeats();
  c[1]->StopHeartbeats();
  absl::StatusOr<v1::JoinResponse> alone = c[0]->Join(5, 1);
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(std::string(alone.status().message()), HasSubstr("--min-workers 2"));
}

TEST(RendezvousGenerations, ANewHostTakesTheSurvivorsGenerationAndState) {
  // worker-0's process (and its server) was lost; its replacement serves a
  // fresh rendezvous, which the survivors join with generation 4's state.
  const Options o;
  auto server = StartServer(o);
  std::vector<std::unique_ptr<RendezvousClient>> c;
  for (int i = 0; i < 3; ++i) c.push_back(Client(server->port(), i, 100 + i, o));
  auto joined = JoinAll({c[0].get(), c[1].get(), c[2].get()}, {{-1, 0}, {300, 4}, {300, 4}});
  for (auto& j : joined) ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(joined[0]->generation_number(), 5u);
  EXPECT_EQ(joined[0]->state_rank(), 1);
  EXPECT_THAT(joined[0]->change(), HasSubstr("the rendezvous host"));
  EXPECT_EQ(joined[0]->lost(), 1);
  EXPECT_EQ(joined[0]->joined(), 0);
}

}  // namespace
}  // namespace kubetrain::allreduce
