// The update policies' tests: a started ShardParams, and workers' gradient
// slots, without a PsShard around them.
#ifndef KUBETRAIN_TESTS_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_TEST_UTIL_H_
#define KUBETRAIN_TESTS_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "runtime/exchange/ps/shard_params.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"

namespace kubetrain::ps::testing_util {

// `n` parameters, all `value`, at global step 0; sgd at lr `lr` with
// `momentum` (0: no optimizer state).
inline std::unique_ptr<ShardParams> StartedParams(size_t n, float value, float lr, float momentum) {
  auto p = std::make_unique<ShardParams>();
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.momentum = momentum;
  EXPECT_TRUE(p->Allocate(n, o).ok());
  std::span<float> v = p->Overwrite();
  std::fill(v.begin(), v.end(), value);
  optim::LrScheduleOptions lr_options;
  lr_options.base_lr = lr;
  p->Start(0, *optim::LrSchedule::Create(lr_options));
  return p;
}

inline std::vector<float> Values(const ShardParams& p) {
  return std::vector<float>(p.values().begin(), p.values().end());
}

inline std::vector<float> State(const ShardParams& p) {
  std::vector<float> out;
  for (std::span<float> s : p.optimizer_state()) out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace kubetrain::ps::testing_util

#endif  // KUBETRAIN_TESTS_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_TEST_UTIL_H_
