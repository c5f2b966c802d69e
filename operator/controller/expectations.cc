#include "operator/controller/expectations.h"

namespace kubetrain::controller {

Expectations::Expectations(const Clock& clock, absl::Duration ttl) : clock_(clock), ttl_(ttl) {}

void Expectations::ExpectCreations(const std::string& key, const std::set<std::string>& names) {
  if (names.empty()) return;
  absl::MutexLock lock(&mu_);
  Pending& p = pending_[key];
  p.creates.insert(names.begin(), names.end());
  p.since_nanos = clock_.NowNanos();
}

void Expectations::ExpectDeletions(const std::string& key, const std::set<std::string>& uids) {
  if (uids.empty()) return;
  absl::MutexLock lock(&mu_);
  Pending& p = pending_[key];
  p.deletes.insert(uids.begin(), uids.end());
  p.since_nanos = clock_.NowNanos();
}

void Expectations::CreationObserved(const std::string& key, const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  it->second.creates.erase(name);
  if (it->second.creates.empty() && it->second.deletes.empty()) pending_.erase(it);
}

void Expectations::DeletionObserved(const std::string& key, const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  it->second.deletes.erase(uid);
  if (it->second.creates.empty() && it->second.deletes.empty()) pending_.erase(it);
}

bool Expectations::Satisfied(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return true;
  return clock_.NowNanos() - it->second.since_nanos >= absl::ToInt64Nanoseconds(ttl_);
}

void Expectations::Forget(const std::string& key) {
  absl::MutexLock lock(&mu_);
  pending_.erase(key);
}

}  // namespace kubetrain::controller
