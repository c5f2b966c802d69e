// The operator stops in time with a backlog: hundreds of TrainingJobs to
// reconcile at the default client rate limit (20 requests/s, minutes of
// work), then SIGTERM. It must stop taking work, drop queued keys, plans
// and requests waiting for the rate limit, release its Lease and exit well
// inside Kubernetes' default 30 s grace period: within 5 s. Against the API
// emulator by default; with the `realapi` label against a real control
// plane (KUBETRAIN_TEST_KUBECONFIG).
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "operator/kube/object.h"
#include "testing/kube_test_target.h"
#include "tests/support/running_process.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

#ifndef KUBETRAIN_OPERATOR_BIN
#error "KUBETRAIN_OPERATOR_BIN must name the kubetrain-operator binary"
#endif

namespace kubetrain::operator_main {
namespace {

using ::testing::HasSubstr;
using testing_util::RunningProcess;

constexpr int kJobs = 300;

kube::Json Job(const std::string& ns, int i) {
  return kube::Json::parse(absl::StrCat(R"({
    "apiVersion": "kubetrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "backlog-)",
                                        i, R"(", "namespace": ")", ns, R"("},
    "spec": {"replicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
      {"name": "kubetrain", "image": "kubetrain:0.1.0", "args": ["train"]}]}}}}}})"));
}

TEST(OperatorShutdown, WithABacklogSigtermExitsWithinFiveSeconds) {
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  ASSERT_TRUE(target.ok()) << target.status();
  testing::KubeTestTarget& t = **target;
  const std::string ns = t.ns();
  for (int i = 0; i < kJobs; ++i) {
    absl::StatusOr<kube::Json> created = t.client().Create(kube::kTrainingJobs, ns, Job(ns, i));
    ASSERT_TRUE(created.ok()) << created.status();
  }
  data::testing_util::TempDir dir;
  std::string kubeconfig;
  if (const char* real = std::getenv("KUBETRAIN_TEST_KUBECONFIG"); real != nullptr && *real) {
    kubeconfig = real;
  } else {
    kubeconfig = dir.File("kubeconfig");
    data::testing_util::WritePlain(
        kubeconfig, absl::StrCat("apiVersion: v1\nkind: Config\nclusters:\n- name: e\n  cluster: "
                                 "{server: \"",
                                 t.config().server,
                                 "\"}\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: e\n  "
                                 "context: {cluster: e, user: u}\ncurrent-context: e\n"));
  }
  RunningProcess op(
      {KUBETRAIN_OPERATOR_BIN, "--kubeconfig", kubeconfig, "--namespace", ns,
       "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
       "--webhook-bind-address", "0", "--leader-elect", "--leader-election-namespace", ns},
      {});
  // Working through the backlog at 20 requests/s: some pods exist, most do
  // not (2 pods, 2 Services, a Secret and status writes a job: over a minute).
  auto pods = [&] {
    absl::StatusOr<kube::ObjectList> list = t.client().List(kube::kPods, ns, {});
    return list.ok() ? static_cast<int>(list->items.size()) : -1;
  };
  ASSERT_TRUE(testing_util::WaitFor([&] { return pods() >= 10; }, absl::Seconds(120)))
      << op.Output();
  ASSERT_LT(pods(), kJobs) << "the backlog is gone before the test could stop the operator";
  const auto start = std::chrono::steady_clock::now();
  op.Signal(SIGTERM);
  const int code = op.Wait(std::chrono::seconds(60));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 0) << op.Output();
  EXPECT_LT(took, 5.0) << op.Output();
  EXPECT_THAT(op.Output(), HasSubstr("received SIGTERM"));
  // The Lease is free for a successor.
  absl::StatusOr<kube::Json> lease = t.client().Get(kube::kLeases, ns, "kubetrain-operator");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(kube::StringAt(*lease, {"spec", "holderIdentity"}), "") << lease->dump();
  std::printf("SIGTERM to exit with %d jobs pending: %.2f s\n", kJobs, took);
}

}  // namespace
}  // namespace kubetrain::operator_main
