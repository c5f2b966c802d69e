#include "api/json_fields.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace kubetrain::api::json_fields {

using nlohmann::json;

absl::Status FieldError(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

std::string Describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::string:
      return absl::StrCat("\"", v.get<std::string>(), "\"");
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "a mapping";
    default:
      return "a value";
  }
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

absl::Status CheckObject(const json& v, const std::string& path) {
  if (!v.is_object()) return FieldError(path, absl::StrCat("must be a mapping, got ", Describe(v)));
  return absl::OkStatus();
}

absl::Status CheckKnownFields(const json& obj, const std::string& path,
                              std::initializer_list<const char*> known) {
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();  // named, not bound: the lambda captures it
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) ==
        known.end()) {
      return FieldError(Join(path, key),
                        absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// Absent or null fields leave `out` unchanged.
absl::Status GetString(const json& obj, const std::string& key, const std::string& path,
                       std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return FieldError(Join(path, key), absl::StrCat("must be a string, got ", Describe(*it)));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetBool(const json& obj, const std::string& key, const std::string& path, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return FieldError(Join(path, key), absl::StrCat("must be true or false, got ", Describe(*it)));
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status GetStringMap(const json& obj, const std::string& key, const std::string& path,
                          std::map<std::string, std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  const std::string p = Join(path, key);
  if (absl::Status s = CheckObject(*it, p); !s.ok()) return s;
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return FieldError(Join(p, k), absl::StrCat("must be a string, got ", Describe(v)));
    }
    (*out)[k] = v.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status GetStringList(const json& obj, const std::string& key, const std::string& path,
                           std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  const std::string p = Join(path, key);
  if (!it->is_array()) return FieldError(p, absl::StrCat("must be a list, got ", Describe(*it)));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) {
      return FieldError(absl::StrCat(p, "[", i, "]"),
                        absl::StrCat("must be a string, got ", Describe(v)));
    }
    out->push_back(v.get<std::string>());
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::api::json_fields
