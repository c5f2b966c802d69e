// WorkQueue: the operator's rate-limited, delaying work queue, with
// client-go's workqueue semantics (k8s.io/client-go/util/workqueue):
//   - an item is queued at most once: adding an item that is already queued
//     does nothing;
//   - an item is handed to at most one worker at a time: adding an item that
//     is being processed marks it, and it is queued again when its worker
//     calls Done();
//   - AddAfter() queues an item after a delay, measured on the queue's
//     kubetrain::Clock by its own timer thread, so it fires with no other
//     event (with a FakeClock, when the test advances the clock); an item
//     waiting twice keeps the earlier time;
//   - AddRateLimited() delays by the RateLimiter's answer; Forget() resets it.
//
// A worker loop:
//   std::string key;
//   while (queue.Get(&key)) {
//     absl::Status s = Reconcile(key);
//     if (s.ok()) queue.Forget(key); else queue.AddRateLimited(key);
//     queue.Done(key);
//   }
//
// WorkQueue is thread-safe. Workers blocked in Get() must have returned
// before the queue is destroyed (ShutDown() wakes them).
#ifndef KUBETRAIN_OPERATOR_KUBE_WORK_QUEUE_H_
#define KUBETRAIN_OPERATOR_KUBE_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/clock_waiter.h"
#include "operator/kube/rate_limiter.h"

namespace kubetrain::kube {

// Receives the queue's metrics (client-go's workqueue metrics). The queue
// calls it with none of its own locks held, from whichever thread caused the
// event (workers, adders, the timer thread), so implementations must be
// thread-safe. OnDepth() calls are serialised and never report a stale depth
// after a newer one; an observer must not add to or take from the queue from
// inside OnDepth().
class WorkQueueObserver {
 public:
  virtual ~WorkQueueObserver() = default;
  // Items queued (not processing, not delayed), after each change.
  virtual void OnDepth(int /*depth*/) {}
  // An add that was not de-duplicated away.
  virtual void OnAdd() {}
  // An AddAfter() (and so AddRateLimited()) accepted while not shutting down.
  virtual void OnRetry() {}
  // How long an item was queued before Get() handed it out.
  virtual void OnLatency(absl::Duration /*queued_for*/) {}
  // How long an item was processing, from Get() to Done().
  virtual void OnWorkDuration(absl::Duration /*work*/) {}
};

class WorkQueue {
 public:
  // `limiter` must not be null. `clock` times delays, latencies and work, and
  // must outlive the queue; so must `observer`, when not null.
  WorkQueue(std::unique_ptr<RateLimiter> limiter, const Clock& clock,
            WorkQueueObserver* observer = nullptr);
  // Shuts down (as ShutDown()) and joins the timer thread.
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `item` unless it is already queued; an item being processed is
  // queued again after its Done(). Ignored once shutting down.
  void Add(const std::string& item);
  // Queues `item` after `delay` (<= 0: at once, as Add()). If `item` is
  // already waiting, the earlier of the two times is kept.
  void AddAfter(const std::string& item, absl::Duration delay);
  // AddAfter(item, limiter->When(item)).
  void AddRateLimited(const std::string& item);
  // The limiter forgets `item`'s failures (it does not leave the queue).
  void Forget(const std::string& item);
  int NumRequeues(const std::string& item) const;

  // Blocks until an item is available and hands it out (the caller must call
  // Done(item) when finished). Returns false once the queue is shut down: at
  // once after ShutDown(); after ShutDownWithDrain(), once nothing queued is
  // left to hand out.
  bool Get(std::string* item);
  // Get() with a deadline on the queue's clock: false on timeout or
  // shutdown; `*shut_down`, when not null, says which.
  bool GetWithTimeout(std::string* item, absl::Duration timeout, bool* shut_down = nullptr);
  // Processing of `item` finished. Unknown items are ignored.
  void Done(const std::string& item);

  // Get() returns false at once (blocked ones wake), adds are ignored and
  // delayed adds are dropped. Done() still works. Idempotent.
  void ShutDown();
  // Stops accepting adds and drops delayed adds, keeps handing out what is
  // queued (including items re-added before the shutdown whose Done() comes
  // later), and blocks until every item handed out has had Done(). A
  // concurrent ShutDown() ends the wait early.
  void ShutDownWithDrain();
  bool ShuttingDown() const;

  // Items queued: not processing, not delayed.
  int Len() const;
  // Items waiting in AddAfter().
  int Delayed() const;

 private:
  // What happened under the lock, reported to the observer after it.
  struct Events {
    int adds = 0;
    std::vector<absl::Duration> latencies;
    absl::Duration work = absl::ZeroDuration();
    bool has_work = false;
    bool retry = false;
    int64_t depth_seq = 0;  // 0: depth did not change.
    int depth = 0;
  };
  struct Timed {
    absl::Time when;
    std::string item;
    bool operator>(const Timed& other) const { return when > other.when; }
  };

  void AddLocked(const std::string& item, absl::Time now, Events* events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DepthChangedLocked(Events* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropDelayedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanGet() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DrainDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a CanGet() wait: hands out the front item, or returns false when
  // shut down.
  bool TakeLocked(std::string* item, Events* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Report(const Events& events) ABSL_LOCKS_EXCLUDED(mu_);
  void TimerLoop();
  absl::Time Now() const { return absl::FromUnixNanos(waiter_.NowNanos()); }

  const std::unique_ptr<RateLimiter> limiter_;
  WorkQueueObserver* const observer_;

  mutable absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // Needs processing (queued, or re-added while processing); with the time it
  // was first added, for OnLatency.
  absl::flat_hash_map<std::string, absl::Time> dirty_ ABSL_GUARDED_BY(mu_);
  // Handed out, not yet Done(); with the time it was handed out.
  absl::flat_hash_map<std::string, absl::Time> processing_ ABSL_GUARDED_BY(mu_);
  // Delayed items: the earliest time of each, and a min-heap over them that
  // may also hold superseded (later) entries, skipped when popped.
  absl::flat_hash_map<std::string, absl::Time> waiting_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>> timers_ ABSL_GUARDED_BY(mu_);
  // Waits on the clock; woken when the earliest timer changes, or shutdown.
  ClockWaiter waiter_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_ ABSL_GUARDED_BY(mu_) = false;
  int64_t depth_seq_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex report_mu_;  // Serialises OnDepth(); never held with mu_.
  int64_t reported_depth_seq_ ABSL_GUARDED_BY(report_mu_) = 0;

  std::thread timer_thread_;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_WORK_QUEUE_H_
