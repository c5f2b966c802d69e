#include "operator/controller/event_recorder.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

EventRecorder::EventRecorder(kube::KubeClient& client, const Clock& clock, kube::Logger* logger,
                             std::string component, size_t max_pending)
    : client_(client),
      clock_(clock),
      logger_(logger),
      component_(std::move(component)),
      max_pending_(std::max<size_t>(1, max_pending)) {
  sender_ = std::thread([this] { Send(); });
}

EventRecorder::~EventRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  sender_.join();
}

void EventRecorder::Record(const nlohmann::json& object, const std::string& type,
                           const std::string& reason, const std::string& message) {
  const int64_t now_us = clock_.UnixMicros();
  absl::BitGen gen;
  // client-go names events <object>.<unix nanos in hex>.
  std::string name = absl::StrFormat("%s.%x%04x", kube::Name(object), now_us,
                                     absl::Uniform<uint32_t>(gen, 0, 0xffff));
  nlohmann::json event{{"metadata", {{"name", name}, {"namespace", kube::Namespace(object)}}},
                       {"involvedObject",
                        {{"apiVersion", object.value("apiVersion", "")},
                         {"kind", object.value("kind", "")},
                         {"name", kube::Name(object)},
                         {"namespace", kube::Namespace(object)},
                         {"uid", kube::Uid(object)},
                         {"resourceVersion", kube::ResourceVersionOf(object)}}},
                       {"reason", reason},
                       {"message", message},
                       {"type", type},
                       {"source", {{"component", component_}}},
                       {"reportingComponent", component_},
                       {"firstTimestamp", kube::FormatTime(now_us)},
                       {"lastTimestamp", kube::FormatTime(now_us)},
                       {"count", 1}};
  Pending pending{kube::Namespace(object), absl::StrCat(reason, " on ", kube::ObjectKey(object)),
                  std::move(event)};
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (queue_.size() >= max_pending_) {
      dropped = ++dropped_;
    } else {
      queue_.push_back(std::move(pending));
      return;
    }
  }
  // Log the first drop and then every 100th, not each.
  if (dropped == 1 || dropped % 100 == 0) {
    logger_->Warning("events", absl::StrCat(max_pending_,
                                            " events are waiting to be posted; "
                                            "dropped ",
                                            pending.what, " (", dropped, " dropped so far)"));
  }
}

void EventRecorder::Send() {
  while (true) {
    Pending pending;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      pending = std::move(queue_.front());
      queue_.pop_front();
      sending_ = true;
    }
    absl::StatusOr<nlohmann::json> created =
        client_.Create(kube::kEvents, pending.ns, pending.event);
    if (!created.ok()) {
      logger_->Warning(
          "events", absl::StrCat("cannot record ", pending.what, ": ", created.status().message()));
    }
    absl::MutexLock lock(&mu_);
    sending_ = false;
  }
}

bool EventRecorder::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || (queue_.empty() && !sending_);
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout) && queue_.empty() && !sending_;
}

int64_t EventRecorder::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace kubetrain::controller
