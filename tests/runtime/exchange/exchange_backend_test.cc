// The exchange backend follows the cluster shape, first fitting candidate
// wins, and the list is the one place that says so.
#include "runtime/exchange/exchange_backend.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::exchange {
namespace {

TEST(ExchangeBackendTest, CandidatesInOrder) {
  std::vector<std::string> names;
  for (const ExchangeBackendCandidate& c : ExchangeBackendCandidates()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ps", "allreduce", "local"}));
}

TEST(ExchangeBackendTest, ParameterServersWhenTheClusterHasThem) {
  EXPECT_EQ(ChooseExchangeBackend({.has_cluster = true, .ps_replicas = 1, .training_replicas = 2}),
            ExchangeBackend::kParameterServer);
  EXPECT_EQ(ChooseExchangeBackend({.has_cluster = true, .ps_replicas = 3, .training_replicas = 1}),
            ExchangeBackend::kParameterServer);
}

TEST(ExchangeBackendTest, AllreduceForAClusterWithoutParameterServers) {
  EXPECT_EQ(ChooseExchangeBackend({.has_cluster = true, .ps_replicas = 0, .training_replicas = 4}),
            ExchangeBackend::kAllreduce);
  // One worker in a TF_CONFIG cluster is still a world (of one).
  EXPECT_EQ(ChooseExchangeBackend({.has_cluster = true, .ps_replicas = 0, .training_replicas = 1}),
            ExchangeBackend::kAllreduce);
}

TEST(ExchangeBackendTest, LocalWithoutACluster) {
  EXPECT_EQ(ChooseExchangeBackend({}), ExchangeBackend::kLocal);
  EXPECT_EQ(ExchangeBackendName(ExchangeBackend::kLocal), "local");
  EXPECT_EQ(ExchangeBackendName(ExchangeBackend::kParameterServer), "ps");
  EXPECT_EQ(ExchangeBackendName(ExchangeBackend::kAllreduce), "allreduce");
}

}  // namespace
}  // namespace kubetrain::exchange
