#include "testing/kube_emulator_patch.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

// Merge keys of the core/v1 lists the operator touches (patchMergeKey tags).
const std::map<std::string, std::string>& MergeKeys() {
  static const auto* keys = new std::map<std::string, std::string>{
      {"containers", "name"},
      {"initContainers", "name"},
      {"ephemeralContainers", "name"},
      {"volumes", "name"},
      {"env", "name"},
      {"volumeMounts", "mountPath"},
      {"conditions", "type"},
      {"ownerReferences", "uid"},
      {"imagePullSecrets", "name"},
      {"containerStatuses", "name"},
      {"initContainerStatuses", "name"},
      {"hostAliases", "ip"},
      {"topologySpreadConstraints", "topologyKey"},
  };
  return *keys;
}

json MergeList(const std::string& field, const json& target, const json& patch) {
  auto key_it = MergeKeys().find(field);
  if (!patch.is_array()) return patch;
  if (key_it == MergeKeys().end() || !target.is_array()) {
    if (field == "finalizers" && target.is_array()) {
      json out = target;
      for (const json& v : patch) {
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
      }
      return out;
    }
    // Replace, dropping directive entries.
    json out = json::array();
    for (const json& v : patch) {
      if (v.is_object() && v.contains("$patch")) continue;
      out.push_back(v);
    }
    return out;
  }
  const std::string& key = key_it->second;
  json out = target;
  for (const json& item : patch) {
    if (!item.is_object() || !item.contains(key)) {
      out.push_back(item);
      continue;
    }
    auto existing = std::find_if(out.begin(), out.end(), [&](const json& e) {
      return e.is_object() && e.contains(key) && e[key] == item[key];
    });
    bool del = item.value("$patch", std::string()) == "delete";
    if (del) {
      if (existing != out.end()) out.erase(existing);
      continue;
    }
    if (existing == out.end()) {
      out.push_back(ApplyStrategicMergePatch(json::object(), item));
    } else {
      *existing = ApplyStrategicMergePatch(*existing, item);
    }
  }
  return out;
}

}  // namespace

json ApplyMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json out = target.is_object() ? target : json::object();
  for (const auto& [k, v] : patch.items()) {
    if (v.is_null()) {
      out.erase(k);
    } else {
      out[k] = ApplyMergePatch(out.contains(k) ? out[k] : json(), v);
    }
  }
  return out;
}

absl::StatusOr<json> ApplyJsonPatch(const json& target, const json& patch) {
  if (!patch.is_array()) return absl::InvalidArgumentError("patch is not an array");
  try {
    return target.patch(patch);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

json ApplyStrategicMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json out = target.is_object() ? target : json::object();
  if (patch.value("$patch", std::string()) == "replace") {
    json copy = patch;
    copy.erase("$patch");
    return copy;
  }
  for (const auto& [k, v] : patch.items()) {
    if (k == "$patch" || k == "$setElementOrder" || absl::StartsWith(k, "$setElementOrder/")) {
      continue;
    }
    if (absl::StartsWith(k, "$deleteFromPrimitiveList/")) {
      std::string field = k.substr(sizeof("$deleteFromPrimitiveList/") - 1);
      if (out.contains(field) && out[field].is_array() && v.is_array()) {
        json kept = json::array();
        for (const json& e : out[field]) {
          if (std::find(v.begin(), v.end(), e) == v.end()) kept.push_back(e);
        }
        if (kept.empty()) {
          out.erase(field);
        } else {
          out[field] = kept;
        }
      }
      continue;
    }
    if (k == "$retainKeys") {
      if (!v.is_array()) continue;
      std::vector<std::string> keep;
      for (const json& e : v) {
        if (e.is_string()) keep.push_back(e.get<std::string>());
      }
      for (auto it = out.begin(); it != out.end();) {
        if (std::find(keep.begin(), keep.end(), it.key()) == keep.end() &&
            !patch.contains(it.key())) {
          it = out.erase(it);
        } else {
          ++it;
        }
      }
      continue;
    }
    if (v.is_null()) {
      out.erase(k);
    } else if (v.is_object()) {
      out[k] = ApplyStrategicMergePatch(out.contains(k) ? out[k] : json(), v);
    } else if (v.is_array()) {
      out[k] = MergeList(k, out.contains(k) ? out[k] : json(), v);
    } else {
      out[k] = v;
    }
  }
  return out;
}

}  // namespace kubetrain::testing
