// The field-reading toolkit of the TrainingJob decoder: typed reads of one
// JSON field with errors that name its path ("spec.runPolicy.backoffLimit:
// must be an integer, got \"x\""). Absent or null fields leave the output
// unchanged. Internal to api/; stateless and thread-safe.
#ifndef KUBETRAIN_API_JSON_FIELDS_H_
#define KUBETRAIN_API_JSON_FIELDS_H_

#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::api::json_fields {

// InvalidArgument "<path>: <problem>".
absl::Status FieldError(const std::string& path, const std::string& problem);
// A value as an error message shows it: null, true, "text", 3, a list, a mapping.
std::string Describe(const nlohmann::json& v);
// "path.key" ("key" at the root).
std::string Join(const std::string& path, const std::string& key);
absl::Status CheckObject(const nlohmann::json& v, const std::string& path);
// Refuses any key of `obj` not in `known`.
absl::Status CheckKnownFields(const nlohmann::json& obj, const std::string& path,
                              std::initializer_list<const char*> known);
absl::Status GetString(const nlohmann::json& obj, const std::string& key, const std::string& path,
                       std::string* out);
absl::Status GetBool(const nlohmann::json& obj, const std::string& key, const std::string& path,
                     bool* out);
absl::Status GetStringMap(const nlohmann::json& obj, const std::string& key,
                          const std::string& path, std::map<std::string, std::string>* out);
absl::Status GetStringList(const nlohmann::json& obj, const std::string& key,
                           const std::string& path, std::vector<std::string>* out);

template <typename Int>
absl::Status IntValue(const nlohmann::json& v, const std::string& path, Int* out) {
  if (!v.is_number_integer()) {
    return FieldError(path, absl::StrCat("must be an integer, got ", Describe(v)));
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
      return FieldError(path, absl::StrCat("out of range, got ", u));
    }
    *out = static_cast<Int>(u);
    return absl::OkStatus();
  }
  const int64_t i = v.get<int64_t>();
  if (i < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      i > static_cast<int64_t>(std::numeric_limits<Int>::max())) {
    return FieldError(path, absl::StrCat("out of range, got ", i));
  }
  *out = static_cast<Int>(i);
  return absl::OkStatus();
}

template <typename Int>
absl::Status GetOptionalInt(const nlohmann::json& obj, const std::string& key,
                            const std::string& path, std::optional<Int>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  Int v{};
  if (absl::Status s = IntValue(*it, Join(path, key), &v); !s.ok()) return s;
  *out = v;
  return absl::OkStatus();
}

template <typename Enum>
absl::Status GetEnum(const nlohmann::json& obj, const std::string& key, const std::string& path,
                     std::optional<Enum> (*parse)(std::string_view), const std::string& choices,
                     std::optional<Enum>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  std::optional<Enum> v;
  if (it->is_string()) v = parse(it->get<std::string>());
  if (!v) {
    return FieldError(Join(path, key),
                      absl::StrCat("must be one of ", choices, ", got ", Describe(*it)));
  }
  *out = v;
  return absl::OkStatus();
}

}  // namespace kubetrain::api::json_fields

#endif  // KUBETRAIN_API_JSON_FIELDS_H_
