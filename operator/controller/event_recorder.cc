#include "operator/controller/event_recorder.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

EventRecorder::EventRecorder(kube::KubeClient& client, kube::Logger* logger, std::string component)
    : client_(client), logger_(logger), component_(std::move(component)) {}

void EventRecorder::Record(const nlohmann::json& object, const std::string& type,
                           const std::string& reason, const std::string& message) {
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
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
  absl::StatusOr<nlohmann::json> created =
      client_.Create(kube::kEvents, kube::Namespace(object), event);
  if (!created.ok()) {
    logger_->Warning("events",
                     absl::StrCat("cannot record ", reason, " on ", kube::ObjectKey(object), ": ",
                                  created.status().message()));
  }
}

}  // namespace kubetrain::controller
