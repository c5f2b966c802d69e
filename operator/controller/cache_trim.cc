#include "operator/controller/cache_trim.h"

#include <initializer_list>
#include <string>

namespace kubetrain::controller {
namespace {

using Json = nlohmann::json;

// `object` with only the keys named (object values only; anything else is
// left as it is).
void KeepOnly(Json& object, std::initializer_list<const char*> keys) {
  if (!object.is_object()) return;
  Json kept = Json::object();
  for (const char* k : keys) {
    auto it = object.find(k);
    if (it != object.end()) kept[k] = std::move(*it);
  }
  object = std::move(kept);
}

void TrimMetadata(Json& object) {
  auto meta = object.find("metadata");
  if (meta == object.end()) return;
  KeepOnly(*meta, {"name", "namespace", "uid", "resourceVersion", "labels", "annotations",
                   "ownerReferences", "creationTimestamp", "deletionTimestamp"});
  auto annotations = meta->find("annotations");
  if (annotations != meta->end() && annotations->is_object()) {
    annotations->erase("kubectl.kubernetes.io/last-applied-configuration");
    if (annotations->empty()) meta->erase(annotations);
  }
}

// How a container ended (exit code, reason, termination message), or what
// it waits for (reason, message): what classifies a failure (pod_status.h).
void TrimState(Json& container_status, const char* which) {
  auto state = container_status.find(which);
  if (state == container_status.end()) return;
  KeepOnly(*state, {"terminated", "waiting"});
  auto terminated = state->find("terminated");
  if (terminated != state->end()) KeepOnly(*terminated, {"exitCode", "reason", "message"});
  auto waiting = state->find("waiting");
  if (waiting != state->end()) KeepOnly(*waiting, {"reason", "message"});
}

}  // namespace

void TrimCachedPod(Json& pod) {
  if (!pod.is_object()) return;
  TrimMetadata(pod);
  auto spec = pod.find("spec");
  if (spec != pod.end() && spec->is_object()) {
    Json containers = Json::array();
    auto found = spec->find("containers");
    if (found != spec->end() && found->is_array()) {
      for (Json& c : *found) {
        KeepOnly(c, {"name"});
        containers.push_back(std::move(c));
      }
    }
    Json trimmed{{"containers", std::move(containers)}};
    auto node = spec->find("nodeName");
    if (node != spec->end() && node->is_string()) trimmed["nodeName"] = std::move(*node);
    *spec = std::move(trimmed);
  }
  auto status = pod.find("status");
  if (status != pod.end() && status->is_object()) {
    KeepOnly(*status, {"phase", "reason", "message", "podIP", "conditions", "containerStatuses"});
    auto conditions = status->find("conditions");
    if (conditions != status->end() && conditions->is_array()) {
      for (Json& c : *conditions) {
        // DisruptionTarget's (and PodScheduled's) reason and message say why.
        const bool why = c.is_object() && c.value("type", "") != "Ready";
        if (why) {
          KeepOnly(c, {"type", "status", "reason", "message"});
        } else {
          KeepOnly(c, {"type", "status"});
        }
      }
    }
    auto statuses = status->find("containerStatuses");
    if (statuses != status->end() && statuses->is_array()) {
      for (Json& c : *statuses) {
        KeepOnly(c, {"name", "restartCount", "state", "lastState"});
        if (!c.is_object()) continue;
        TrimState(c, "state");
        TrimState(c, "lastState");
      }
    }
  }
  KeepOnly(pod, {"apiVersion", "kind", "metadata", "spec", "status"});
}

void TrimCachedService(Json& service) {
  if (!service.is_object()) return;
  TrimMetadata(service);
  KeepOnly(service, {"apiVersion", "kind", "metadata"});
}

void TrimCachedNode(Json& node) {
  TrimMetadata(node);
  auto meta = node.find("metadata");
  if (meta != node.end()) {
    meta->erase("annotations");
    meta->erase("labels");
  }
  node.erase("spec");
  auto status = node.find("status");
  if (status == node.end() || !status->is_object()) return;
  Json ready = Json::array();
  auto conditions = status->find("conditions");
  if (conditions != status->end() && conditions->is_array()) {
    for (Json& c : *conditions) {
      if (!c.is_object() || c.value("type", "") != "Ready") continue;
      KeepOnly(c, {"type", "status", "reason", "message", "lastTransitionTime"});
      ready.push_back(std::move(c));
    }
  }
  *status = Json{{"conditions", std::move(ready)}};
}

}  // namespace kubetrain::controller
