#include "operator/controller/action_runner.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {

ActionRunner::ActionRunner(int threads, Done done, const Clock& clock, ActionObserver* observer)
    : done_(std::move(done)), clock_(clock), observer_(observer) {
  const int n = std::max(1, threads);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Work(); });
}

ActionRunner::~ActionRunner() { Stop(); }

absl::Status ActionRunner::Submit(const std::string& key, Plan plan) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("action runner stopped");
    if (busy_.contains(key)) {
      return absl::FailedPreconditionError(absl::StrCat(key, " already has a plan in flight"));
    }
    busy_[key] = false;
    // Counted before a thread can take it (and report it done).
    if (observer_ != nullptr) observer_->OnSubmit();
    queue_.push_back(Item{key, std::move(plan), clock_.NowNanos()});
  }
  return absl::OkStatus();
}

bool ActionRunner::DeferIfBusy(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = busy_.find(key);
  if (it == busy_.end()) return false;
  it->second = true;
  return true;
}

int ActionRunner::InFlight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(busy_.size());
}

void ActionRunner::Work() {
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    const int64_t start = clock_.NowNanos();
    absl::Status status;
    // No exception may leave a thread (that ends the process).
    try {
      status = item.plan();
    } catch (const std::exception& e) {
      status =
          absl::InternalError(absl::StrCat("actions for ", item.key, ": exception: ", e.what()));
    }
    const int64_t end = clock_.NowNanos();
    item.plan = nullptr;  // what the plan holds goes before the key is free
    bool wanted = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = busy_.find(item.key);
      if (it != busy_.end()) {
        wanted = it->second;
        busy_.erase(it);
      }
    }
    if (observer_ != nullptr) {
      observer_->OnPlan(absl::Nanoseconds(start - item.queued_nanos),
                        absl::Nanoseconds(end - start), !status.ok());
    }
    if (done_) done_(item.key, status, wanted);
  }
}

void ActionRunner::Stop() {
  std::deque<Item> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Plans not started are dropped (their jobs are reconciled again by
    // whoever runs next); plans in flight finish.
    dropped.swap(queue_);
    for (const Item& item : dropped) busy_.erase(item.key);
  }
  for (Item& item : dropped) {
    item.plan = nullptr;
    if (observer_ != nullptr) observer_->OnPlan(absl::ZeroDuration(), absl::ZeroDuration(), true);
    if (done_) done_(item.key, absl::CancelledError("the action runner stopped"), false);
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace kubetrain::controller
