// Shared by the operator benches: creating many objects from several
// clients at once, as a burst of users would.
#ifndef KUBETRAIN_BENCH_CREATE_ALL_H_
#define KUBETRAIN_BENCH_CREATE_ALL_H_

#include <atomic>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "operator/kube/kube_client.h"
#include "operator/kube/resource.h"
#include "testing/kube_test_target.h"

namespace kubetrain::bench {

// Creates `jobs` objects from `threads` clients at once; returns errors.
inline int CreateAll(testing::KubeTestTarget& target, const kube::ResourceType& type, int jobs,
                     int threads, const std::function<nlohmann::json(int)>& make) {
  std::vector<std::unique_ptr<kube::KubeClient>> clients;
  for (int t = 0; t < threads; ++t) clients.push_back(*target.NewClient());
  std::atomic<int> errors{0};
  std::vector<std::thread> creators;
  for (int t = 0; t < threads; ++t) {
    creators.emplace_back([&, t] {
      for (int i = t; i < jobs; i += threads) {
        absl::StatusOr<nlohmann::json> created = clients[t]->Create(type, target.ns(), make(i));
        if (!created.ok() && errors++ == 0) std::cerr << "create: " << created.status() << "\n";
      }
    });
  }
  for (std::thread& c : creators) c.join();
  return errors.load();
}

}  // namespace kubetrain::bench

#endif  // KUBETRAIN_BENCH_CREATE_ALL_H_
