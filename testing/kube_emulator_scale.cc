#include "testing/kube_emulator_scale.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testing/kube_emulator_admission.h"
#include "testing/kube_emulator_patch.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

std::vector<std::string> PathParts(const std::string& path) {
  std::vector<std::string> parts = absl::StrSplit(path, '.', absl::SkipEmpty());
  return parts;
}

const json* At(const json& object, const std::string& path) {
  const json* node = &object;
  for (const std::string& part : PathParts(path)) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

void SetAt(json& object, const std::string& path, const json& value) {
  json* node = &object;
  for (const std::string& part : PathParts(path)) {
    if (!node->is_object()) *node = json::object();
    node = &(*node)[part];
  }
  *node = value;
}

ApiResult Invalid(const std::string& name, const std::string& field, const std::string& value,
                  const std::string& message) {
  StatusDetails d;
  d.name = name;
  d.group = "autoscaling";
  d.kind = "Scale";
  d.causes.push_back(
      {"FieldValueInvalid", absl::StrCat("Invalid value: ", value, ": ", message), field});
  return StatusResult(422, "Invalid",
                      absl::StrCat("Scale.autoscaling \"", name, "\" is invalid: ", field,
                                   ": Invalid value: ", value, ": ", message),
                      d);
}

}  // namespace

OrderedJson ScaleOf(const json& object, const ScaleSubresource& scale, bool* found) {
  const json meta = object.value("metadata", json::object());
  OrderedJson out = OrderedJson::object();
  out["kind"] = "Scale";
  out["apiVersion"] = "autoscaling/v1";
  OrderedJson m = OrderedJson::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta.contains(key)) m[key] = meta[key];
  }
  out["metadata"] = std::move(m);
  const json* spec_replicas = At(object, scale.spec_replicas_path);
  *found = spec_replicas != nullptr && spec_replicas->is_number_integer();
  OrderedJson spec = OrderedJson::object();
  // autoscaling/v1 ScaleSpec.replicas is omitempty.
  if (*found && spec_replicas->get<int64_t>() != 0)
    spec["replicas"] = spec_replicas->get<int64_t>();
  out["spec"] = std::move(spec);
  OrderedJson status = OrderedJson::object();
  const json* status_replicas = At(object, scale.status_replicas_path);
  status["replicas"] = status_replicas != nullptr && status_replicas->is_number_integer()
                           ? status_replicas->get<int64_t>()
                           : 0;
  if (!scale.label_selector_path.empty()) {
    const json* selector = At(object, scale.label_selector_path);
    if (selector != nullptr && selector->is_string() && !selector->get<std::string>().empty()) {
      status["selector"] = *selector;
    }
  }
  out["status"] = std::move(status);
  return out;
}

ApiResult ServeScale(EmulatorStore& store, const ResourceType& rt, const ScaleSubresource& scale,
                     const std::string& ns, const std::string& name, const std::string& method,
                     const std::string& content_type, const std::string& body) {
  if (method != "GET" && method != "PUT" && method != "PATCH") {
    return StatusResult(405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                        StatusDetails{});
  }
  const std::string type = content_type.substr(0, content_type.find(';'));
  json request;
  if (method != "GET") {
    request = json::parse(body, nullptr, false);
    if (request.is_discarded()) {
      return StatusResult(400, "BadRequest", "the body of the request could not be decoded",
                          std::nullopt);
    }
  }
  if (method == "PATCH" && type != "application/merge-patch+json" &&
      type != "application/strategic-merge-patch+json" && type != "application/json-patch+json") {
    return StatusResult(415, "UnsupportedMediaType", "415: Unsupported Media Type",
                        StatusDetails{});
  }
  // GuaranteedUpdate's retries on a conflict the client did not ask for.
  for (int attempt = 0; attempt < 16; ++attempt) {
    ApiResult current = store.Get(rt, ns, name);
    if (current.code != 200) return current;
    const json object = json::parse(current.body.dump());
    bool found = false;
    const OrderedJson old_scale = ScaleOf(object, scale, &found);
    if (method == "GET") {
      if (!found) {
        return StatusResult(500, "InternalError",
                            absl::StrCat("Internal error occurred: the spec replicas field \"",
                                         scale.spec_replicas_path, "\" does not exist"),
                            StatusDetails{});
      }
      return ApiResult{200, old_scale, {}};
    }
    json wanted;
    if (method == "PUT") {
      wanted = request;
    } else {
      json base = json::parse(old_scale.dump());
      // An absent spec.replicas reads as the server's "not set" marker.
      if (!found) base["spec"]["replicas"] = std::numeric_limits<int32_t>::min();
      if (type == "application/json-patch+json") {
        if (!request.is_array()) {
          return StatusResult(400, "BadRequest",
                              absl::StrCat("json: cannot unmarshal ", request.type_name(),
                                           " into Go value of type jsonpatch.Patch"),
                              std::nullopt);
        }
        absl::StatusOr<json> patched = ApplyJsonPatch(base, request);
        if (!patched.ok()) {
          return StatusResult(422, "Invalid", std::string(patched.status().message()),
                              std::nullopt);
        }
        wanted = *std::move(patched);
      } else {
        if (!request.is_object()) {
          return StatusResult(400, "BadRequest", "the body of the request could not be decoded",
                              std::nullopt);
        }
        wanted = ApplyMergePatch(base, request);
      }
    }
    if (!wanted.is_object()) {
      return StatusResult(400, "BadRequest", "the body of the request could not be decoded",
                          std::nullopt);
    }
    const json wanted_spec = wanted.value("spec", json::object());
    const json replicas =
        wanted_spec.is_object() ? wanted_spec.value("replicas", json(0)) : json(0);
    if (!replicas.is_number_integer()) {
      return StatusResult(400, "BadRequest",
                          "json: cannot unmarshal into Go struct field ScaleSpec.spec.replicas of "
                          "type int32",
                          std::nullopt);
    }
    const int64_t n = replicas.get<int64_t>();
    if (n == std::numeric_limits<int32_t>::min()) {
      return StatusResult(400, "BadRequest",
                          absl::StrCat("the spec replicas field \"", scale.spec_replicas_path,
                                       "\" cannot be empty"),
                          std::nullopt);
    }
    if (n < 0) {
      return Invalid(name, "spec.replicas", absl::StrCat(n), "must be greater than or equal to 0");
    }
    const json wanted_meta = wanted.value("metadata", json::object());
    std::string precondition =
        wanted_meta.is_object() ? wanted_meta.value("resourceVersion", std::string()) : "";
    // A patch starts from the current Scale, whose resourceVersion is no
    // precondition of the client's: only one the patch itself sets is.
    if (method == "PATCH" &&
        precondition == old_scale["metadata"].value("resourceVersion", std::string())) {
      precondition.clear();
    }
    // Validating webhooks see the Scale (as kube-apiserver's admission of
    // <plural>/scale does), not the resource.
    EmulatorStore::AdmissionInputs in = store.AdmissionInputsFor(ns);
    if (!in.configurations.empty()) {
      AdmissionAttributes a;
      a.rt = &rt;
      a.sub_resource = "scale";
      a.operation = "UPDATE";
      a.ns = ns;
      a.name = name;
      a.kind_group = "autoscaling";
      a.kind_version = "v1";
      a.kind = "Scale";
      a.old_object = json::parse(old_scale.dump());
      a.object = a.old_object;
      a.object["spec"]["replicas"] = n;
      a.namespace_labels = std::move(in.namespace_labels);
      if (std::optional<ApiResult> refused = RunValidatingWebhooks(in.configurations, a)) {
        return *refused;
      }
    }
    json updated = object;
    SetAt(updated, scale.spec_replicas_path, n);
    if (!precondition.empty()) updated["metadata"]["resourceVersion"] = precondition;
    ApiResult written = store.Update(rt, ns, name, updated.dump(), false, /*admitted=*/true);
    if (written.code == 409 && precondition.empty()) continue;
    if (written.code != 200) return written;
    bool written_found = false;
    return ApiResult{200, ScaleOf(json::parse(written.body.dump()), scale, &written_found), {}};
  }
  return StatusResult(
      409, "Conflict",
      absl::StrCat("Operation cannot be fulfilled on ", rt.GroupResource(), " \"", name,
                   "\": the object has been modified; please apply your "
                   "changes to the latest version and try again"),
      StatusDetails{});
}

}  // namespace kubetrain::testing
