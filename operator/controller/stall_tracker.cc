#include "operator/controller/stall_tracker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kubetrain::controller {
namespace {

std::string Where(const std::string& pod, const std::string& node) {
  return absl::StrCat("(pod ", pod, node.empty() ? "" : " on ", node, ")");
}

}  // namespace

void StallTracker::Observe(const std::string& job_uid, const std::vector<ReplicaReading>& replicas,
                           double now) {
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = jobs_.try_emplace(job_uid);
  Job& job = it->second;
  if (fresh) job.progressed_at = now;
  for (const ReplicaReading& r : replicas) {
    auto [rit, new_replica] = job.replicas.try_emplace(r.replica);
    Replica& seen = rit->second;
    if (seen.pod != r.pod) {
      // A new pod (or the first sight): its own clock starts now, and a
      // recreated replica is a fresh start for the job.
      if (!new_replica) job.progressed_at = std::max(job.progressed_at, now);
      seen = Replica{};
    }
    seen.pod = r.pod;
    seen.node = r.node;
    seen.trains = r.trains;
    if (!r.step.has_value()) {
      seen.answered = false;
      seen.waiting_seconds = 0;
      continue;
    }
    seen.answered = true;
    job.any_answered = true;
    seen.waiting_seconds = r.waiting_seconds;
    if (!r.trains) continue;
    if (seen.step != r.step) {
      job.progressed_at = std::max(job.progressed_at, now);
      seen.step = r.step;
    }
  }
}

std::optional<Stall> StallTracker::Check(const std::string& job_uid, double timeout_seconds,
                                         double now) const {
  if (!(timeout_seconds > 0)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_uid);
  if (it == jobs_.end() || it->second.replicas.empty()) return std::nullopt;
  const Job& job = it->second;
  // A job whose replicas never answered exposes no metrics (another image,
  // metrics off): nothing to judge by.
  if (!job.any_answered) return std::nullopt;
  double longest_wait = 0;
  for (const auto& [name, r] : job.replicas)
    longest_wait = std::max(longest_wait, r.waiting_seconds);
  const double idle = now - job.progressed_at;
  if (idle < timeout_seconds && longest_wait < timeout_seconds) return std::nullopt;
  // Behind: the replicas that stopped answering, and those at the lowest
  // step of the ones that answer (all of them when they agree).
  std::optional<int64_t> lowest, highest;
  for (const auto& [name, r] : job.replicas) {
    if (!r.answered || !r.trains || !r.step.has_value()) continue;
    lowest = lowest ? std::min(*lowest, *r.step) : *r.step;
    highest = highest ? std::max(*highest, *r.step) : *r.step;
  }
  // Replicas that stopped answering are the ones behind (the others wait
  // for them); when all answer, those at the lowest step.
  bool any_silent = false;
  for (const auto& [name, r] : job.replicas) any_silent = any_silent || !r.answered;
  Stall stall;
  std::vector<std::string> parts;
  for (const auto& [name, r] : job.replicas) {
    if (!r.answered) {
      parts.push_back(
          absl::StrCat(name, " ", Where(r.pod, r.node), " stopped answering",
                       r.step ? absl::StrCat(" (last at step ", *r.step, ")") : std::string()));
      stall.pods.push_back(r.pod);
    } else if (!any_silent && r.trains && r.step.has_value() && lowest.has_value() &&
               *r.step == *lowest) {
      parts.push_back(
          absl::StrCat(name, " ", Where(r.pod, r.node), " has not finished step ", *r.step + 1));
      stall.pods.push_back(r.pod);
    }
  }
  if (parts.empty()) return std::nullopt;  // nothing read yet to name
  stall.message = absl::StrJoin(parts, "; ");
  if (highest.has_value() && (any_silent || (lowest.has_value() && *highest > *lowest))) {
    absl::StrAppend(&stall.message, "; others wait at step ", *highest);
  }
  if (longest_wait >= timeout_seconds && idle < timeout_seconds) {
    absl::StrAppend(&stall.message, " (a replica has waited that long for its peers)");
  }
  return stall;
}

void StallTracker::Forget(const std::string& job_uid) {
  absl::MutexLock lock(&mu_);
  jobs_.erase(job_uid);
}

}  // namespace kubetrain::controller
