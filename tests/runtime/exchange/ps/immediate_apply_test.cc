// ImmediateApply on its own, and which policy each mode gets.
#include "runtime/exchange/ps/immediate_apply.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/exchange/ps/consistency_rule.h"
#include "runtime/exchange/ps/sync_aggregator.h"
#include "runtime/exchange/ps/update_policy.h"
#include "runtime/metrics/runtime_metrics.h"
#include "tests/runtime/exchange/ps/update_policy_test_util.h"

namespace kubetrain::ps {
namespace {

using testing_util::StartedParams;
using testing_util::Values;

// Each push is one update, at once, in arrival order; its staleness (the
// updates since its worker pulled) is recorded.
TEST(ImmediateApply, AppliesEachPushAsItComes) {
  metrics::RuntimeMetrics metrics({.constant_labels = {}, .ps_server = true});
  ImmediateApply policy(&metrics);
  std::unique_ptr<ShardParams> params = StartedParams(4, 10.0f, /*lr=*/1.0f, /*momentum=*/0);
  const std::vector<float> one(4, 1.0f), two(4, 2.0f);
  EXPECT_FALSE(policy.pipelined());

  policy.Push(*params, 1, one, /*pulled_step=*/0);
  EXPECT_EQ(params->global_step(), 1);
  EXPECT_EQ(Values(*params), std::vector<float>(4, 9.0f));
  EXPECT_FALSE(policy.Holds(1));  // nothing waits
  policy.Push(*params, 1, one, /*pulled_step=*/1);
  policy.Push(*params, 0, two, /*pulled_step=*/0);  // computed two updates ago
  EXPECT_EQ(params->global_step(), 3);
  EXPECT_EQ(params->updates(), 3);
  EXPECT_EQ(Values(*params), std::vector<float>(4, 6.0f));
  policy.WorkerDone(*params, 0);  // holds nothing back
  EXPECT_EQ(params->global_step(), 3);

  for (const auto& f : metrics.registry()->Collect()) {
    if (f.name != "kubetrain_ps_gradient_staleness_steps") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    EXPECT_EQ(f.metric[0].histogram.sample_count, 3u);
    EXPECT_EQ(f.metric[0].histogram.sample_sum, 2.0);  // 0 + 0 + 2
    return;
  }
  ADD_FAILURE() << "no staleness histogram";
}

// The mode picks the policy, in one place; pipelined rounds only where
// every worker's gradient makes the step.
TEST(MakeUpdatePolicy, FollowsTheMode) {
  std::vector<std::unique_ptr<ConsistencyRule>> rules;  // outlive the policies
  auto make = [&rules](const std::string& mode, int aggregate, bool pipeline) {
    const ExchangeMode m = *ExchangeMode::Parse(mode);
    rules.push_back(MakeConsistencyRule(m, 2, aggregate));
    return MakeUpdatePolicy(
        {.mode = m, .num_workers = 2, .replicas_to_aggregate = aggregate, .pipeline = pipeline},
        *rules.back(), nullptr);
  };
  std::unique_ptr<UpdatePolicy> sync = make("sync", 0, false);
  EXPECT_NE(dynamic_cast<SyncAggregator*>(sync.get()), nullptr);
  EXPECT_FALSE(sync->pipelined());
  EXPECT_TRUE(make("sync", 0, true)->pipelined());
  EXPECT_TRUE(make("sync", 2, true)->pipelined());
  EXPECT_FALSE(make("sync", 1, true)->pipelined());  // backup workers
  for (const char* mode : {"async", "ssp:2"}) {
    std::unique_ptr<UpdatePolicy> p = make(mode, 0, true);
    EXPECT_NE(dynamic_cast<ImmediateApply*>(p.get()), nullptr) << mode;
    EXPECT_FALSE(p->pipelined()) << mode;
  }
}

}  // namespace
}  // namespace kubetrain::ps
