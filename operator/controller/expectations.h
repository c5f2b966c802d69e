// Expectations: how many creates and which deletes a job's last reconcile
// is still waiting to see in the informer cache (controller-runtime/
// Kubernetes' ControllerExpectations). While a job's expectations are
// unmet, its reconcile must not create or delete pods again: the cache is
// stale and would make it create duplicates. Expectations expire after a
// timeout so a lost watch event cannot wedge a job forever.
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_EXPECTATIONS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_EXPECTATIONS_H_

#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace kubetrain::controller {

class Expectations {
 public:
  explicit Expectations(const Clock& clock, absl::Duration ttl = absl::Minutes(5));

  // Before issuing creates of these object names / deletes of these uids.
  void ExpectCreations(const std::string& key, const std::set<std::string>& names);
  void ExpectDeletions(const std::string& key, const std::set<std::string>& uids);
  // From informer events (or when a request failed and nothing will come).
  void CreationObserved(const std::string& key, const std::string& name);
  void DeletionObserved(const std::string& key, const std::string& uid);
  // True when nothing is pending or the expectations timed out.
  bool Satisfied(const std::string& key) const;
  void Forget(const std::string& key);

 private:
  struct Pending {
    std::set<std::string> creates;
    std::set<std::string> deletes;
    int64_t since_nanos = 0;
  };
  const Clock& clock_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_EXPECTATIONS_H_
