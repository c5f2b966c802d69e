#include "operator/kube/object.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

namespace {

const Json* NodeAt(const Json& obj, std::initializer_list<absl::string_view> path) {
  const Json* node = &obj;
  for (absl::string_view key : path) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(std::string(key));
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

}  // namespace

std::string StringAt(const Json& obj, std::initializer_list<absl::string_view> path) {
  const Json* node = NodeAt(obj, path);
  return node != nullptr && node->is_string() ? node->get<std::string>() : "";
}

int64_t IntAt(const Json& obj, std::initializer_list<absl::string_view> path, int64_t fallback) {
  const Json* node = NodeAt(obj, path);
  return node != nullptr && node->is_number_integer() ? node->get<int64_t>() : fallback;
}

std::string Name(const Json& obj) { return StringAt(obj, {"metadata", "name"}); }
std::string Namespace(const Json& obj) { return StringAt(obj, {"metadata", "namespace"}); }
std::string Uid(const Json& obj) { return StringAt(obj, {"metadata", "uid"}); }
std::string ResourceVersionOf(const Json& obj) {
  return StringAt(obj, {"metadata", "resourceVersion"});
}

bool NewerResourceVersion(const std::string& a, const std::string& b) {
  uint64_t x = 0;
  uint64_t y = 0;
  return absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y) && x > y;
}

int64_t Generation(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata")) return 0;
  const Json& meta = obj["metadata"];
  if (!meta.is_object() || !meta.contains("generation") || !meta["generation"].is_number()) {
    return 0;
  }
  return meta["generation"].get<int64_t>();
}

bool IsBeingDeleted(const Json& obj) {
  return !StringAt(obj, {"metadata", "deletionTimestamp"}).empty();
}

std::map<std::string, std::string> Labels(const Json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object() || !obj.contains("metadata")) return out;
  const Json& meta = obj["metadata"];
  if (!meta.is_object() || !meta.contains("labels") || !meta["labels"].is_object()) return out;
  for (const auto& [key, value] : meta["labels"].items()) {
    if (value.is_string()) out[key] = value.get<std::string>();
  }
  return out;
}

std::string Label(const Json& obj, absl::string_view key) {
  return StringAt(obj, {"metadata", "labels", key});
}

std::string Annotation(const Json& obj, absl::string_view key) {
  return StringAt(obj, {"metadata", "annotations", key});
}

std::string ObjectKey(const Json& obj) { return ObjectKey(Namespace(obj), Name(obj)); }

std::string ObjectKey(absl::string_view ns, absl::string_view name) {
  if (ns.empty()) return std::string(name);
  return absl::StrCat(ns, "/", name);
}

std::pair<std::string, std::string> SplitObjectKey(absl::string_view key) {
  size_t slash = key.find('/');
  if (slash == absl::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

std::optional<std::string> ControllerUid(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata")) return std::nullopt;
  const Json& meta = obj["metadata"];
  if (!meta.is_object() || !meta.contains("ownerReferences")) return std::nullopt;
  const Json& refs = meta["ownerReferences"];
  if (!refs.is_array()) return std::nullopt;
  for (const Json& ref : refs) {
    if (ref.is_object() && ref.value("controller", false) && ref.contains("uid") &&
        ref["uid"].is_string()) {
      return ref["uid"].get<std::string>();
    }
  }
  return std::nullopt;
}

Json ControllerReference(const Json& owner) {
  return Json{{"apiVersion", owner.value("apiVersion", "")},
              {"kind", owner.value("kind", "")},
              {"name", Name(owner)},
              {"uid", Uid(owner)},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

std::string FormatTime(int64_t unix_micros) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(unix_micros),
                          absl::UTCTimeZone());
}

std::string FormatMicroTime(int64_t unix_micros) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(unix_micros),
                          absl::UTCTimeZone());
}

std::optional<int64_t> ParseTimeMicros(absl::string_view text) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &err)) return std::nullopt;
  return absl::ToUnixMicros(t);
}

}  // namespace kubetrain::kube
