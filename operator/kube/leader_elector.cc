#include "operator/kube/leader_elector.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {
namespace {

int64_t Seconds(absl::Duration d) {
  return static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(d)));
}

}  // namespace

absl::Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.identity.empty()) return absl::InvalidArgumentError("leader election: empty identity");
  if (c.lease_name.empty()) {
    return absl::InvalidArgumentError("--leader-election-id: must not be empty");
  }
  if (c.retry_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--retry-period: must be > 0");
  }
  if (c.renew_deadline <= c.retry_period) {
    return absl::InvalidArgumentError("--renew-deadline: must be greater than --retry-period");
  }
  if (c.lease_duration <= c.renew_deadline) {
    return absl::InvalidArgumentError("--lease-duration: must be greater than --renew-deadline");
  }
  return absl::OkStatus();
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config,
                             LeaderCallbacks callbacks, const Clock& clock, Logger* logger)
    : client_(client),
      config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      clock_(clock),
      logger_(logger),
      log_name_(absl::StrCat("leader-election/", config_.lease_namespace, "/", config_.lease_name)),
      waiter_(clock_, &mu_) {}

std::string LeaderElector::NowMicroTime() const { return FormatMicroTime(clock_.UnixMicros()); }

std::string LeaderElector::LeaderIdentity() const {
  absl::MutexLock lock(&mu_);
  return observed_holder_;
}

void LeaderElector::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

bool LeaderElector::WaitUnlessStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  waiter_.AwaitFor(
      mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; }, d);
  return !stopping_;
}

void LeaderElector::ObserveHolder(const std::string& holder) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    if (holder != observed_holder_) {
      observed_holder_ = holder;
      changed = true;
    }
  }
  if (changed && !holder.empty()) {
    logger_->Info(log_name_, absl::StrCat("leader is ", holder));
    if (callbacks_.on_new_leader) callbacks_.on_new_leader(holder);
  }
}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew() {
  const std::string now = NowMicroTime();
  absl::StatusOr<Json> lease = client_.Get(kLeases, config_.lease_namespace, config_.lease_name);
  if (!lease.ok() && !absl::IsNotFound(lease.status())) {
    logger_->Warning(log_name_, absl::StrCat("cannot read the lease: ", lease.status().message()));
    return Attempt::kFailed;
  }
  if (!lease.ok()) {
    Json fresh{{"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
               {"spec",
                {{"holderIdentity", config_.identity},
                 {"leaseDurationSeconds", Seconds(config_.lease_duration)},
                 {"acquireTime", now},
                 {"renewTime", now},
                 {"leaseTransitions", 0}}}};
    absl::StatusOr<Json> created = client_.Create(kLeases, config_.lease_namespace, fresh);
    if (!created.ok()) {
      // Someone else created it first (409): we are not the leader this round.
      if (!absl::IsAlreadyExists(created.status())) {
        logger_->Warning(log_name_,
                         absl::StrCat("cannot create the lease: ", created.status().message()));
      }
      return Attempt::kFailed;
    }
    lease_resource_version_ = ResourceVersionOf(*created);
    observed_record_ = (*created)["spec"].dump();
    observed_at_nanos_ = clock_.NowNanos();
    ObserveHolder(config_.identity);
    return Attempt::kHeld;
  }

  Json spec =
      lease->contains("spec") && (*lease)["spec"].is_object() ? (*lease)["spec"] : Json::object();
  std::string holder = StringAt(spec, {"holderIdentity"});
  std::string record = spec.dump();
  if (record != observed_record_) {
    observed_record_ = record;
    observed_at_nanos_ = clock_.NowNanos();
  }
  ObserveHolder(holder);
  int64_t duration_s = IntAt(spec, {"leaseDurationSeconds"}, Seconds(config_.lease_duration));
  bool expired = clock_.NowNanos() - observed_at_nanos_ >= duration_s * 1'000'000'000LL;
  bool mine = holder == config_.identity;
  if (!holder.empty() && !mine && !expired) return Attempt::kNotHeld;

  Json updated = *lease;
  updated["spec"] = spec;  // an object, whatever the server sent
  updated["spec"]["holderIdentity"] = config_.identity;
  updated["spec"]["leaseDurationSeconds"] = Seconds(config_.lease_duration);
  updated["spec"]["renewTime"] = now;
  if (!mine) {
    updated["spec"]["acquireTime"] = now;
    updated["spec"]["leaseTransitions"] = IntAt(spec, {"leaseTransitions"}, 0) + 1;
  }
  absl::StatusOr<Json> written = client_.Update(kLeases, updated);
  if (!written.ok()) {
    if (!IsConflict(written.status())) {
      logger_->Warning(log_name_,
                       absl::StrCat("cannot update the lease: ", written.status().message()));
    }
    return Attempt::kFailed;
  }
  lease_resource_version_ = ResourceVersionOf(*written);
  observed_record_ = (*written)["spec"].dump();
  observed_at_nanos_ = clock_.NowNanos();
  ObserveHolder(config_.identity);
  return Attempt::kHeld;
}

void LeaderElector::Release() {
  absl::StatusOr<Json> lease = client_.Get(kLeases, config_.lease_namespace, config_.lease_name);
  if (!lease.ok()) return;
  if (StringAt(*lease, {"spec", "holderIdentity"}) != config_.identity) return;
  Json released = *lease;
  std::string now = NowMicroTime();
  released["spec"]["holderIdentity"] = "";
  released["spec"]["leaseDurationSeconds"] = 1;
  released["spec"]["renewTime"] = now;
  released["spec"]["acquireTime"] = now;
  absl::StatusOr<Json> written = client_.Update(kLeases, released);
  if (written.ok()) {
    logger_->Info(log_name_, "released the lease");
  } else {
    logger_->Warning(log_name_,
                     absl::StrCat("cannot release the lease: ", written.status().message()));
  }
}

absl::Status LeaderElector::Run() {
  logger_->Info(log_name_, absl::StrCat("candidate ", config_.identity, " trying to acquire"));
  // Acquire.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::OkStatus();
    }
    if (TryAcquireOrRenew() == Attempt::kHeld) break;
    if (!WaitUnlessStopped(config_.retry_period)) return absl::OkStatus();
  }
  leading_ = true;
  logger_->Info(log_name_, absl::StrCat(config_.identity, " acquired the lease"));
  if (callbacks_.on_started_leading) callbacks_.on_started_leading();

  // Renew.
  int64_t last_renew = clock_.NowNanos();
  absl::Status result = absl::OkStatus();
  while (WaitUnlessStopped(config_.retry_period)) {
    Attempt attempt = TryAcquireOrRenew();
    if (attempt == Attempt::kHeld) {
      last_renew = clock_.NowNanos();
      continue;
    }
    bool past_deadline =
        clock_.NowNanos() - last_renew >= absl::ToInt64Nanoseconds(config_.renew_deadline);
    if (attempt == Attempt::kNotHeld || past_deadline) {
      result = absl::AbortedError(absl::StrCat(
          "leader election lost: ", attempt == Attempt::kNotHeld
                                        ? absl::StrCat("the lease is held by ", LeaderIdentity())
                                        : "could not renew the lease within the renew deadline"));
      break;
    }
  }
  leading_ = false;
  if (result.ok()) {
    if (config_.release_on_stop) Release();
  } else {
    logger_->Error(log_name_, result.message());
  }
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
  return result;
}

}  // namespace kubetrain::kube
