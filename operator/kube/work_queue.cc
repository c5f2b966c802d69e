#include "operator/kube/work_queue.h"

#include <string>
#include <utility>

#include "base/check.h"

namespace kubetrain::kube {

WorkQueue::WorkQueue(std::unique_ptr<RateLimiter> limiter, const Clock& clock,
                     WorkQueueObserver* observer)
    : limiter_(std::move(limiter)), observer_(observer), waiter_(clock, &mu_) {
  KT_CHECK(limiter_ != nullptr) << "WorkQueue needs a RateLimiter";
  timer_thread_ = std::thread([this] { TimerLoop(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  timer_thread_.join();
}

void WorkQueue::Add(const std::string& item) {
  Events events;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    AddLocked(item, Now(), &events);
  }
  Report(events);
}

void WorkQueue::AddAfter(const std::string& item, absl::Duration delay) {
  Events events;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    events.retry = true;
    const absl::Time now = Now();
    if (delay <= absl::ZeroDuration()) {
      AddLocked(item, now, &events);
    } else {
      const absl::Time when = now + delay;
      auto [it, inserted] = waiting_.try_emplace(item, when);
      if (inserted || when < it->second) {
        it->second = when;
        const bool earliest = timers_.empty() || when < timers_.top().when;
        timers_.push(Timed{when, item});
        if (earliest) waiter_.Wake(mu_);
      }
    }
  }
  Report(events);
}

void WorkQueue::AddRateLimited(const std::string& item) { AddAfter(item, limiter_->When(item)); }

void WorkQueue::Forget(const std::string& item) { limiter_->Forget(item); }

int WorkQueue::NumRequeues(const std::string& item) const { return limiter_->NumRequeues(item); }

bool WorkQueue::Get(std::string* item) {
  Events events;
  bool got;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &WorkQueue::CanGet));
    got = TakeLocked(item, &events);
  }
  Report(events);
  return got;
}

bool WorkQueue::GetWithTimeout(std::string* item, absl::Duration timeout, bool* shut_down) {
  Events events;
  bool got = false;
  bool down = false;
  {
    absl::MutexLock lock(&mu_);
    if (waiter_.AwaitFor(
            mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return CanGet(); }, timeout)) {
      got = TakeLocked(item, &events);
      down = !got;
    }
  }
  if (shut_down != nullptr) *shut_down = down;
  Report(events);
  return got;
}

void WorkQueue::Done(const std::string& item) {
  Events events;
  {
    absl::MutexLock lock(&mu_);
    auto it = processing_.find(item);
    if (it == processing_.end()) return;
    events.work = Now() - it->second;
    events.has_work = true;
    processing_.erase(it);
    if (dirty_.contains(item)) {  // Re-added while processing.
      queue_.push_back(item);
      DepthChangedLocked(&events);
    }
  }
  Report(events);
}

void WorkQueue::ShutDown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  drain_ = false;
  DropDelayedLocked();
  waiter_.Wake(mu_);
}

void WorkQueue::ShutDownWithDrain() {
  absl::MutexLock lock(&mu_);
  if (!shutting_down_) drain_ = true;  // After ShutDown() there is nothing to drain.
  shutting_down_ = true;
  DropDelayedLocked();
  waiter_.Wake(mu_);
  mu_.Await(absl::Condition(this, &WorkQueue::DrainDone));
}

bool WorkQueue::ShuttingDown() const {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

int WorkQueue::Len() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int WorkQueue::Delayed() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.size());
}

void WorkQueue::AddLocked(const std::string& item, absl::Time now, Events* events) {
  if (!dirty_.try_emplace(item, now).second) return;  // Already queued or re-added.
  ++events->adds;
  if (processing_.contains(item)) return;  // Queued again by Done().
  queue_.push_back(item);
  DepthChangedLocked(events);
}

void WorkQueue::DepthChangedLocked(Events* events) {
  events->depth_seq = ++depth_seq_;
  events->depth = static_cast<int>(queue_.size());
}

void WorkQueue::DropDelayedLocked() {
  waiting_.clear();
  timers_ = {};
}

bool WorkQueue::CanGet() const { return !queue_.empty() || shutting_down_; }

bool WorkQueue::DrainDone() const { return !drain_ || (queue_.empty() && processing_.empty()); }

bool WorkQueue::TakeLocked(std::string* item, Events* events) {
  if (shutting_down_ && (!drain_ || queue_.empty())) return false;
  KT_CHECK(!queue_.empty());
  *item = std::move(queue_.front());
  queue_.pop_front();
  const absl::Time now = Now();
  auto it = dirty_.find(*item);
  KT_CHECK(it != dirty_.end()) << "queued item " << *item << " not dirty";
  events->latencies.push_back(now - it->second);
  dirty_.erase(it);
  processing_.emplace(*item, now);
  DepthChangedLocked(events);
  return true;
}

void WorkQueue::Report(const Events& events) {
  if (observer_ == nullptr) return;
  for (int i = 0; i < events.adds; ++i) observer_->OnAdd();
  if (events.retry) observer_->OnRetry();
  for (absl::Duration latency : events.latencies) observer_->OnLatency(latency);
  if (events.has_work) observer_->OnWorkDuration(events.work);
  if (events.depth_seq != 0) {
    absl::MutexLock lock(&report_mu_);
    if (events.depth_seq > reported_depth_seq_) {
      reported_depth_seq_ = events.depth_seq;
      observer_->OnDepth(events.depth);
    }
  }
}

void WorkQueue::TimerLoop() {
  mu_.Lock();
  while (!shutting_down_) {
    Events events;
    const absl::Time now = Now();
    while (!timers_.empty() && timers_.top().when <= now) {
      Timed timer = timers_.top();
      timers_.pop();
      auto it = waiting_.find(timer.item);
      // Skip entries superseded by an earlier time for the same item.
      if (it == waiting_.end() || it->second != timer.when) continue;
      waiting_.erase(it);
      AddLocked(timer.item, now, &events);
    }
    if (events.adds > 0 || events.depth_seq != 0) {
      mu_.Unlock();
      Report(events);
      mu_.Lock();
      continue;
    }
    if (timers_.empty()) {
      waiter_.Wait(mu_);
    } else {
      waiter_.WaitUntil(mu_, absl::ToUnixNanos(timers_.top().when));
    }
  }
  mu_.Unlock();
}

}  // namespace kubetrain::kube
