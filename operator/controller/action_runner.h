// ActionRunner: runs the API requests a reconcile pass decided on (creates,
// deletes, its status write) on threads of its own, so a work-queue worker
// is not held for the round trips and the client rate limiter's wait: the
// pass decides from the caches, records its expectations and hands its
// requests here (the pattern of kube-controller-manager's Job and ReplicaSet
// controllers, whose expectations make a pass that runs before the informer
// has seen the creates create nothing).
//
// One plan per key at a time: while a key's plan runs, DeferIfBusy(key)
// answers true and remembers that a pass was wanted; the completion callback
// then says so, and the controller queues the key again. So a job's
// requests never overlap two passes, as when the worker ran them itself.
//
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_ACTION_RUNNER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_ACTION_RUNNER_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace kubetrain::controller {

// Plans queued, and how long they waited for a thread and ran (benchmarks,
// tests waiting for the requests to be done).
class ActionObserver {
 public:
  virtual ~ActionObserver() = default;
  // A plan was queued (called by Submit, before it returns).
  virtual void OnSubmit() {}
  // Called on the runner's thread once a plan is done.
  virtual void OnPlan(absl::Duration waited, absl::Duration ran, bool error) = 0;
};

class ActionRunner {
 public:
  using Plan = std::function<absl::Status()>;
  // `key`'s plan finished with `status`; `wanted`: a pass was deferred
  // while it ran (DeferIfBusy).
  using Done = std::function<void(const std::string& key, const absl::Status& status, bool wanted)>;

  // `threads` >= 1. Borrows `clock` and `observer` (may be null).
  ActionRunner(int threads, Done done, const Clock& clock, ActionObserver* observer = nullptr);
  ~ActionRunner();  // Stop()
  ActionRunner(const ActionRunner&) = delete;
  ActionRunner& operator=(const ActionRunner&) = delete;

  // Queues `plan` for `key`. FailedPrecondition if the key already has a
  // plan (callers check DeferIfBusy first); Cancelled after Stop().
  absl::Status Submit(const std::string& key, Plan plan);
  // True when `key` has a plan queued or running; records that a pass was
  // wanted, for the completion callback.
  bool DeferIfBusy(const std::string& key);
  // Plans queued or running.
  int InFlight() const;
  // Drops the plans not started (their done callback gets Cancelled), lets
  // the running ones finish, then joins the threads; later Submits are
  // refused. Idempotent.
  void Stop();

 private:
  struct Item {
    std::string key;
    Plan plan;
    int64_t queued_nanos = 0;
  };
  void Work();

  const Done done_;
  const Clock& clock_;
  ActionObserver* const observer_;
  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  // Keys with a plan queued or running -> a pass was deferred meanwhile.
  absl::flat_hash_map<std::string, bool> busy_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_ACTION_RUNNER_H_
