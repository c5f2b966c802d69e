#include "tools/node_agent/kubelet_endpoints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"
#include "tools/node_agent/container_log_index.h"

namespace kubetrain::node_agent {
namespace {

using ::testing::HasSubstr;

// Collects what a handler answers. Write and Gone may be called from the
// handler's thread while the test reads body().
class FakeReply final : public kube::HttpsReply {
 public:
  bool Write(std::string_view bytes) override {
    absl::MutexLock lock(&mu_);
    code_ = 200;
    body_.append(bytes);
    return !gone_.load();
  }
  void Fail(int code, const std::string& text) override {
    absl::MutexLock lock(&mu_);
    code_ = code;
    body_ = text;
  }
  void Respond(int code, const std::string&, const std::string& body) override { Fail(code, body); }
  bool Gone(absl::Duration wait) override {
    ++waits_;
    // Ends a follow that never would (a bug) instead of hanging the test.
    const absl::Time until = absl::Now() + wait;
    while (absl::Now() < until && !gone_.load()) absl::SleepFor(absl::Milliseconds(1));
    return gone_.load() || absl::Now() > give_up_;
  }
  int code() {
    absl::MutexLock lock(&mu_);
    return code_;
  }
  std::string body() {
    absl::MutexLock lock(&mu_);
    return body_;
  }
  std::atomic<bool> gone_{false};
  std::atomic<int> waits_{0};

 private:
  absl::Mutex mu_;
  int code_ = 0;
  std::string body_;
  const absl::Time give_up_ = absl::Now() + absl::Seconds(20);
};

class KubeletEndpointsTest : public ::testing::Test {
 protected:
  KubeletEndpointsTest() {
    std::filesystem::create_directories(dir_.File("team/w-0"));
    log_ = dir_.File("team/w-0/main.log");
    EXPECT_TRUE(CreateRunIndex(log_).ok());
  }
  void Run(const std::string& text, bool end, int code = 137) {
    ASSERT_TRUE(RecordRunStart(log_).ok());
    Append(text);
    if (end) {
      ASSERT_TRUE(RecordRunEnd(log_, code).ok());
    }
  }
  void Append(const std::string& text) { std::ofstream(log_, std::ios::app) << text; }
  void Get(const std::string& path, std::map<std::string, std::string> query, FakeReply& reply) {
    HandleKubeletRequest(dir_.path(), kube::HttpsRequest{"GET", path, std::move(query), {}, ""},
                         reply, absl::Milliseconds(5));
  }

  data::testing_util::TempDir dir_;
  std::string log_;
};

TEST_F(KubeletEndpointsTest, ServesTheCurrentRunOrWithPreviousTheOneBefore) {
  Run("old 1\nold 2\n", true);
  Run("new 1\nnew 2\n", false);
  FakeReply current, previous;
  Get("/containerLogs/team/w-0/main", {}, current);
  EXPECT_EQ(current.code(), 200);
  EXPECT_EQ(current.body(), "new 1\nnew 2\n");
  Get("/containerLogs/team/w-0/main", {{"previous", "true"}}, previous);
  EXPECT_EQ(previous.code(), 200);
  EXPECT_EQ(previous.body(), "old 1\nold 2\n");
}

TEST_F(KubeletEndpointsTest, TailLinesThenLimitBytes) {
  Run("1\n2\n3\n4\n", false);
  FakeReply tail, limit, both;
  Get("/containerLogs/team/w-0/main", {{"tailLines", "2"}}, tail);
  EXPECT_EQ(tail.body(), "3\n4\n");
  Get("/containerLogs/team/w-0/main", {{"limitBytes", "3"}}, limit);
  EXPECT_EQ(limit.body(), "1\n2");
  Get("/containerLogs/team/w-0/main", {{"tailLines", "3"}, {"limitBytes", "3"}}, both);
  EXPECT_EQ(both.body(), "2\n3");
}

TEST_F(KubeletEndpointsTest, AnswersAsTheKubeletForWhatIsNotThere) {
  FakeReply no_pod, no_container, waiting, no_previous, bad, since, no_name, other;
  Get("/containerLogs/team/w-9/main", {}, no_pod);
  EXPECT_EQ(no_pod.code(), 404);
  EXPECT_EQ(no_pod.body(), "pod \"w-9\" does not exist");
  Get("/containerLogs/team/w-0/sidecar", {}, no_container);
  EXPECT_EQ(no_container.code(), 404);
  EXPECT_EQ(no_container.body(), "container \"sidecar\" not found in pod \"w-0\"");
  Get("/containerLogs/team/w-0/main", {}, waiting);
  EXPECT_EQ(waiting.code(), 400);
  EXPECT_THAT(waiting.body(), HasSubstr("is waiting to start"));
  Run("only run\n", false);
  Get("/containerLogs/team/w-0/main", {{"previous", "true"}}, no_previous);
  EXPECT_EQ(no_previous.code(), 400);
  EXPECT_EQ(no_previous.body(), "previous terminated container \"main\" in pod \"w-0\" not found");
  Get("/containerLogs/team/w-0/main", {{"tailLines", "-1"}}, bad);
  EXPECT_EQ(bad.code(), 400);
  Get("/containerLogs/team/w-0/main", {{"sinceSeconds", "10"}}, since);
  EXPECT_EQ(since.code(), 400);
  EXPECT_THAT(since.body(), HasSubstr("not supported"));
  Get("/containerLogs/team/w-0", {}, no_name);
  EXPECT_EQ(no_name.code(), 400);
  Get("/exec/team/w-0/main", {}, other);
  EXPECT_EQ(other.code(), 404);
}

TEST_F(KubeletEndpointsTest, FollowStreamsNewBytesUntilTheRunEnds) {
  Run("first\n", false);
  FakeReply reply;
  std::atomic<bool> returned{false};
  std::thread follow([&] {
    Get("/containerLogs/team/w-0/main", {{"follow", "true"}}, reply);
    returned = true;
  });
  ASSERT_TRUE(testing_util::WaitFor([&] { return reply.body() == "first\n"; }));
  Append("second\n");
  ASSERT_TRUE(testing_util::WaitFor([&] { return reply.body() == "first\nsecond\n"; }))
      << reply.body();
  EXPECT_FALSE(returned.load()) << "the run goes on";
  Append("last\n");
  ASSERT_TRUE(RecordRunEnd(log_, 0).ok());
  EXPECT_TRUE(testing_util::WaitFor([&] { return returned.load(); }));
  follow.join();
  EXPECT_EQ(reply.body(), "first\nsecond\nlast\n");
  EXPECT_EQ(reply.code(), 200);
}

TEST_F(KubeletEndpointsTest, FollowEndsWhenTheClientGoesAway) {
  Run("first\n", false);
  FakeReply reply;
  std::atomic<bool> returned{false};
  std::thread follow([&] {
    Get("/containerLogs/team/w-0/main", {{"follow", "true"}}, reply);
    returned = true;
  });
  ASSERT_TRUE(testing_util::WaitFor([&] { return reply.waits_.load() > 0; }));
  reply.gone_ = true;
  EXPECT_TRUE(testing_util::WaitFor([&] { return returned.load(); }, absl::Seconds(5)));
  follow.join();
}

TEST_F(KubeletEndpointsTest, FollowOfAnEndedRunReturnsAtOnce) {
  Run("old\n", true);
  Run("new\n", false);  // running: --previous is the run before
  FakeReply reply;
  Get("/containerLogs/team/w-0/main", {{"follow", "true"}, {"previous", "true"}}, reply);
  EXPECT_EQ(reply.body(), "old\n");
  EXPECT_EQ(reply.waits_.load(), 0);
}

}  // namespace
}  // namespace kubetrain::node_agent
