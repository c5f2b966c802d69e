#include "testing/structural_schema.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/yaml_json.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

std::string JsonTypeName(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

// A value as the server prints it in "Invalid value: ..." (Go's %#v-like).
std::string Repr(const json& v) { return v.dump(); }

std::string Child(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

bool Nullable(const json& s) { return s.is_object() && s.value("nullable", false); }

bool PreservesUnknown(const json& s) {
  return s.is_object() && s.value("x-kubernetes-preserve-unknown-fields", false);
}

// The schema for map values, or null when there is none.
const json* AdditionalSchema(const json& s) {
  auto it = s.find("additionalProperties");
  if (it == s.end() || !it->is_object()) return nullptr;
  return &*it;
}

bool TypeMatches(const std::string& type, const json& v) {
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    // 2.0 decodes as an integer on the server.
    return v.is_number_float() && std::isfinite(v.get<double>()) &&
           std::floor(v.get<double>()) == v.get<double>();
  }
  return true;  // no or unknown type: anything goes
}

// strfmt's date-time: RFC 3339 with optional fractional seconds.
bool IsDateTime(const std::string& text) {
  absl::Time t;
  std::string err;
  return absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*S%Ez", text, &t, &err) ||
         absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", text, &t, &err);
}

size_t RuneCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string NumberText(const json& limit) {
  if (limit.is_number_float() && std::floor(limit.get<double>()) == limit.get<double>()) {
    return json(static_cast<int64_t>(limit.get<double>())).dump();
  }
  return limit.dump();
}

void Prune(json& v, const json& s) {
  if (!s.is_object()) return;
  if (v.is_array()) {
    if (auto it = s.find("items"); it != s.end() && it->is_object()) {
      for (json& item : v) Prune(item, *it);
    }
    return;
  }
  if (!v.is_object()) return;
  const json* props = s.contains("properties") ? &s["properties"] : nullptr;
  const json* additional = AdditionalSchema(s);
  bool keep_unknown = PreservesUnknown(s) || (s.contains("additionalProperties") &&
                                              s["additionalProperties"].is_boolean() &&
                                              s["additionalProperties"].get<bool>());
  for (auto it = v.begin(); it != v.end();) {
    const json* child = nullptr;
    if (props != nullptr && props->contains(it.key())) {
      child = &(*props)[it.key()];
    } else if (additional != nullptr) {
      child = additional;
    }
    if (child == nullptr) {
      if (keep_unknown) {
        ++it;
      } else {
        it = v.erase(it);
      }
      continue;
    }
    if (it->is_null() && !Nullable(*child)) {
      it = v.erase(it);
      continue;
    }
    Prune(*it, *child);
    ++it;
  }
}

void Default(json& v, const json& s) {
  if (!s.is_object()) return;
  if (v.is_array()) {
    if (auto it = s.find("items"); it != s.end() && it->is_object()) {
      for (json& item : v) Default(item, *it);
    }
    return;
  }
  if (!v.is_object()) return;
  if (auto props = s.find("properties"); props != s.end() && props->is_object()) {
    for (const auto& [key, child] : props->items()) {
      if (!v.contains(key) && child.is_object() && child.contains("default")) {
        v[key] = child["default"];
      }
    }
  }
  const json* additional = AdditionalSchema(s);
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (s.contains("properties") && s["properties"].contains(it.key())) {
      Default(*it, s["properties"][it.key()]);
    } else if (additional != nullptr) {
      Default(*it, *additional);
    }
  }
}

class Validator {
 public:
  explicit Validator(std::vector<SchemaViolation>* out) : out_(out) {}

  void Check(const json& v, const json& s, const std::string& path) {
    if (!s.is_object()) return;
    if (v.is_null() && Nullable(s)) return;
    std::string type = s.value("type", std::string());
    bool type_ok = type.empty() || TypeMatches(type, v);
    if (!type_ok) {
      std::string got = JsonTypeName(v);
      Invalid(path, absl::StrCat("\"", got, "\""),
              absl::StrCat(path, " in body must be of type ", type, ": \"", got, "\""));
    }
    CheckEnum(v, s, path);
    if (!type_ok) return;
    if (v.is_number()) CheckNumber(v, s, path);
    if (v.is_string()) CheckString(v.get<std::string>(), s, path);
    if (v.is_array()) CheckArray(v, s, path);
    if (v.is_object()) CheckObject(v, s, path);
  }

 private:
  void Add(const char* reason, std::string message, const std::string& path) {
    out_->push_back({reason, std::move(message), path});
  }
  void Invalid(const std::string& path, const std::string& value, const std::string& detail) {
    Add("FieldValueInvalid", absl::StrCat("Invalid value: ", value, ": ", detail), path);
  }

  void CheckEnum(const json& v, const json& s, const std::string& path) {
    auto it = s.find("enum");
    if (it == s.end() || !it->is_array()) return;
    for (const json& allowed : *it) {
      if (allowed == v) return;
    }
    std::vector<std::string> values;
    for (const json& allowed : *it) values.push_back(allowed.dump());
    Add("FieldValueNotSupported",
        absl::StrCat("Unsupported value: ", Repr(v),
                     ": supported values: ", absl::StrJoin(values, ", ")),
        path);
  }

  void CheckNumber(const json& v, const json& s, const std::string& path) {
    double x = v.get<double>();
    if (auto it = s.find("minimum"); it != s.end() && it->is_number()) {
      bool exclusive = s.value("exclusiveMinimum", false);
      double min = it->get<double>();
      if (exclusive ? x <= min : x < min) {
        Invalid(path, Repr(v),
                absl::StrCat(path, " in body should be greater than ",
                             exclusive ? "" : "or equal to ", NumberText(*it)));
      }
    }
    if (auto it = s.find("maximum"); it != s.end() && it->is_number()) {
      bool exclusive = s.value("exclusiveMaximum", false);
      double max = it->get<double>();
      if (exclusive ? x >= max : x > max) {
        Invalid(path, Repr(v),
                absl::StrCat(path, " in body should be less than ", exclusive ? "" : "or equal to ",
                             NumberText(*it)));
      }
    }
  }

  void CheckString(const std::string& text, const json& s, const std::string& path) {
    size_t n = RuneCount(text);
    if (auto it = s.find("minLength"); it != s.end() && it->is_number() && n < it->get<size_t>()) {
      Invalid(path, json(text).dump(),
              absl::StrCat(path, " in body should be at least ", it->get<size_t>(), " chars long"));
    }
    if (auto it = s.find("maxLength"); it != s.end() && it->is_number() && n > it->get<size_t>()) {
      Invalid(path, json(text).dump(),
              absl::StrCat(path, " in body should be at most ", it->get<size_t>(), " chars long"));
    }
    if (s.value("format", std::string()) == "date-time" && !IsDateTime(text)) {
      Invalid(path, json(text).dump(),
              absl::StrCat(path, " in body must be of type date-time: ", json(text).dump()));
    }
  }

  void CheckArray(const json& v, const json& s, const std::string& path) {
    if (auto it = s.find("minItems");
        it != s.end() && it->is_number() && v.size() < it->get<size_t>()) {
      Invalid(path, std::to_string(v.size()),
              absl::StrCat(path, " in body should have at least ", it->get<size_t>(), " items"));
    }
    if (auto it = s.find("maxItems");
        it != s.end() && it->is_number() && v.size() > it->get<size_t>()) {
      Invalid(path, std::to_string(v.size()),
              absl::StrCat(path, " in body should have at most ", it->get<size_t>(), " items"));
    }
    if (auto it = s.find("items"); it != s.end() && it->is_object()) {
      for (const json& item : v) Check(item, *it, path);  // no index: as the server
    }
  }

  void CheckObject(const json& v, const json& s, const std::string& path) {
    if (auto it = s.find("required"); it != s.end() && it->is_array()) {
      for (const json& key : *it) {
        if (key.is_string() && !v.contains(key.get<std::string>())) {
          Add("FieldValueRequired", "Required value", Child(path, key.get<std::string>()));
        }
      }
    }
    // The server prints the limit, not the count, for these two.
    if (auto it = s.find("minProperties");
        it != s.end() && it->is_number() && v.size() < it->get<size_t>()) {
      Invalid(
          path, std::to_string(it->get<size_t>()),
          absl::StrCat(path, " in body should have at least ", it->get<size_t>(), " properties"));
    }
    if (auto it = s.find("maxProperties");
        it != s.end() && it->is_number() && v.size() > it->get<size_t>()) {
      Invalid(
          path, std::to_string(it->get<size_t>()),
          absl::StrCat(path, " in body should have at most ", it->get<size_t>(), " properties"));
    }
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    const json* additional = AdditionalSchema(s);
    for (const auto& [key, child] : v.items()) {
      if (props != nullptr && props->contains(key)) {
        Check(child, (*props)[key], Child(path, key));
      } else if (additional != nullptr) {
        Check(child, *additional, Child(path, key));
      }
    }
  }

  std::vector<SchemaViolation>* out_;
};

}  // namespace

absl::StatusOr<StructuralSchema> StructuralSchema::FromCrdFile(const std::string& path,
                                                               const std::string& version) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read CRD manifest ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<json> crd = base::ParseYamlOrJson(text.str(), path);
  if (!crd.ok()) return crd.status();
  absl::StatusOr<StructuralSchema> schema = FromCrd(*crd, version);
  if (!schema.ok()) {
    return absl::Status(schema.status().code(),
                        absl::StrCat(path, ": ", schema.status().message()));
  }
  return schema;
}

absl::StatusOr<StructuralSchema> StructuralSchema::FromCrd(const json& crd,
                                                           const std::string& version) {
  if (!crd.is_object() || crd.value("kind", std::string()) != "CustomResourceDefinition") {
    return absl::InvalidArgumentError("not a CustomResourceDefinition");
  }
  const json spec = crd.value("spec", json::object());
  StructuralSchema s;
  s.group_ = spec.value("group", std::string());
  s.plural_ = spec.value("names", json::object()).value("plural", std::string());
  s.kind_ = spec.value("names", json::object()).value("kind", std::string());
  if (s.group_.empty() || s.plural_.empty() || s.kind_.empty()) {
    return absl::InvalidArgumentError(
        "spec.group, spec.names.plural and spec.names.kind are required");
  }
  for (const json& v : spec.value("versions", json::array())) {
    if (!v.is_object()) continue;
    std::string name = v.value("name", std::string());
    if (version.empty() ? !v.value("storage", false) : name != version) continue;
    const json* schema = nullptr;
    if (v.contains("schema") && v["schema"].is_object() &&
        v["schema"].contains("openAPIV3Schema") && v["schema"]["openAPIV3Schema"].is_object()) {
      schema = &v["schema"]["openAPIV3Schema"];
    }
    if (schema == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("version ", name, " has no schema.openAPIV3Schema"));
    }
    s.version_ = name;
    s.schema_ = *schema;
    const json scale = v.value("subresources", json::object()).value("scale", json::object());
    s.spec_replicas_path_ = scale.value("specReplicasPath", std::string());
    s.status_replicas_path_ = scale.value("statusReplicasPath", std::string());
    return s;
  }
  return absl::NotFoundError(
      absl::StrCat("no version ", version.empty() ? "marked storage" : version));
}

void StructuralSchema::PruneAndDefault(json& object) const {
  if (!object.is_object()) return;
  // apiVersion, kind and metadata are the server's, whatever the schema says.
  json keep = json::object();
  for (const char* k : {"apiVersion", "kind", "metadata"}) {
    if (object.contains(k)) keep[k] = std::move(object[k]);
  }
  Prune(object, schema_);
  Default(object, schema_);
  for (auto& [k, v] : keep.items()) object[k] = std::move(v);
}

namespace {

// How Go's %v and %T print a decoded JSON value.
std::string GoValue(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 1e21) return absl::StrCat(static_cast<int64_t>(d));
    return absl::StrCat(d);
  }
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const json& e : v) parts.push_back(GoValue(e));
    return absl::StrCat("[", absl::StrJoin(parts, " "), "]");
  }
  if (v.is_object()) return "map[...]";
  return v.dump();
}

std::string GoType(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_number_float()) return "float64";
  if (v.is_number()) return "int64";
  if (v.is_boolean()) return "bool";
  if (v.is_array()) return "[]interface {}";
  if (v.is_object()) return "map[string]interface {}";
  return "<nil>";
}

}  // namespace

std::vector<SchemaViolation> StructuralSchema::ValidateScalePath(const json& object,
                                                                 const std::string& path) const {
  if (path.empty()) return {};
  const std::vector<std::string> fields =
      absl::StrSplit(absl::StripPrefix(path, "."), '.', absl::SkipEmpty());
  auto invalid = [&](const std::string& value, const std::string& message) {
    return std::vector<SchemaViolation>{
        {"FieldValueInvalid", absl::StrCat("Invalid value: ", value, ": ", message), path}};
  };
  const json* at = &object;
  std::string walked;
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&walked, ".", fields[i]);
    if (!at->is_object()) return {};
    auto it = at->find(fields[i]);
    if (it == at->end() || it->is_null()) return {};  // not found: no error, as NestedInt64
    if (i + 1 < fields.size() && !it->is_object()) {
      // Go names the field it could not look up, inside the value that is no map.
      return invalid(
          "0", absl::StrCat(walked, ".", fields[i + 1], " accessor error: ", GoValue(*it),
                            " is of the type ", GoType(*it), ", expected map[string]interface{}"));
    }
    at = &*it;
  }
  if (!at->is_number_integer()) {
    return invalid("0", absl::StrCat(walked, " accessor error: ", GoValue(*at), " is of the type ",
                                     GoType(*at), ", expected int64"));
  }
  const int64_t n =
      at->is_number_unsigned() && at->get<uint64_t>() > INT64_MAX ? INT64_MAX : at->get<int64_t>();
  if (n < 0) return invalid(absl::StrCat(n), "should be a non-negative integer");
  if (n > 2147483647) return invalid(absl::StrCat(n), "should be less than or equal to 2147483647");
  return {};
}

std::vector<SchemaViolation> StructuralSchema::Validate(const json& object) const {
  std::vector<SchemaViolation> out;
  Validator(&out).Check(object, schema_, "");
  for (const std::string* path : {&spec_replicas_path_, &status_replicas_path_}) {
    for (SchemaViolation& v : ValidateScalePath(object, *path)) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kubetrain::testing
