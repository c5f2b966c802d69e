#include "base/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::base {
namespace {

using nlohmann::json;

bool IsDigits(std::string_view s, bool (*ok)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}

bool Dec(char c) { return c >= '0' && c <= '9'; }
bool Oct(char c) { return c >= '0' && c <= '7'; }
bool Hex(char c) { return Dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// YAML 1.2 core schema integer: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+.
// Values beyond int64 resolve as floats, as Go's YAML decoders do.
bool ResolveInt(const std::string& s, json* out) {
  int base = 10;
  std::string_view digits = s;
  bool negative = false;
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o' && IsDigits(digits.substr(2), Oct)) {
    base = 8;
    digits.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && IsDigits(digits.substr(2), Hex)) {
    base = 16;
    digits.remove_prefix(2);
  } else {
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (!IsDigits(digits, Dec)) return false;
  }
  const std::string d(digits);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(d.c_str(), &end, base);
  const auto max = static_cast<unsigned long long>(std::numeric_limits<int64_t>::max());
  if (errno == ERANGE || v > max + (negative ? 1ULL : 0ULL)) {
    *out = std::strtod(s.c_str(), nullptr);
    return true;
  }
  if (negative) {
    *out = v == max + 1ULL ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(v);
  } else {
    *out = static_cast<int64_t>(v);
  }
  return true;
}

// YAML 1.2 core schema float.
bool ResolveFloat(const std::string& s, json* out) {
  std::string_view v = s;
  double sign = 1.0;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    sign = v[0] == '-' ? -1.0 : 1.0;
    v.remove_prefix(1);
  }
  if (v == ".inf" || v == ".Inf" || v == ".INF") {
    *out = sign * std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  // (\.[0-9]+ | [0-9]+(\.[0-9]*)?) ([eE][-+]?[0-9]+)?
  size_t i = 0;
  size_t int_digits = 0, frac_digits = 0;
  while (i < v.size() && Dec(v[i])) ++i, ++int_digits;
  if (i < v.size() && v[i] == '.') {
    ++i;
    while (i < v.size() && Dec(v[i])) ++i, ++frac_digits;
    if (int_digits == 0 && frac_digits == 0) return false;
  } else if (int_digits == 0) {
    return false;
  }
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < v.size() && Dec(v[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  if (i != v.size()) return false;
  *out = std::strtod(s.c_str(), nullptr);
  return true;
}

bool ResolveBool(const std::string& s, json* out) {
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}

bool IsNullWord(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::string Where(const std::string& source, const YAML::Mark& mark) {
  return absl::StrCat(source, ":", mark.line + 1, ":", mark.column + 1);
}

absl::StatusOr<json> ResolveScalar(const YAML::Node& node, const std::string& source) {
  const std::string& s = node.Scalar();
  const std::string& tag = node.Tag();
  json v;
  if (tag == "?") {  // plain scalar: resolve by content
    if (IsNullWord(s)) return json(nullptr);
    if (ResolveBool(s, &v) || ResolveInt(s, &v) || ResolveFloat(s, &v)) return v;
    return json(s);
  }
  static const std::string kCore = "tag:yaml.org,2002:";
  if (tag == kCore + "int") {
    if (ResolveInt(s, &v)) return v;
  } else if (tag == kCore + "float") {
    if (ResolveFloat(s, &v) || ResolveInt(s, &v)) return json(v.get<double>());
  } else if (tag == kCore + "bool") {
    if (ResolveBool(s, &v)) return v;
  } else if (tag == kCore + "null") {
    if (IsNullWord(s)) return json(nullptr);
  } else {
    return json(s);  // quoted, block, !!str or an application tag: a string
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Where(source, node.Mark()), ": \"", s, "\" is not a valid ", tag));
}

absl::StatusOr<json> Convert(const YAML::Node& node, const std::string& source, int depth) {
  if (depth > 200) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(source, node.Mark()), ": document nested too deeply"));
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      return ResolveScalar(node, source);
    case YAML::NodeType::Sequence: {
      json arr = json::array();
      for (const YAML::Node& item : node) {
        absl::StatusOr<json> v = Convert(item, source, depth + 1);
        if (!v.ok()) return v.status();
        arr.push_back(*std::move(v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      json obj = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(source, kv.first.Mark()), ": mapping keys must be scalars"));
        }
        const std::string key = kv.first.Scalar();
        if (obj.contains(key)) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(source, kv.first.Mark()), ": duplicate key \"", key, "\""));
        }
        absl::StatusOr<json> v = Convert(kv.second, source, depth + 1);
        if (!v.ok()) return v.status();
        obj[key] = *std::move(v);
      }
      return obj;
    }
  }
  return json(nullptr);
}

bool LooksLikeJson(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' || c == '[';
  }
  return false;
}

absl::StatusOr<json> ParseJson(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the offending byte.
    size_t line = 1, column = 1;
    const size_t end = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ":", column, ": malformed JSON: ", what));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed JSON: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<json> ParseYamlOrJson(const std::string& text, const std::string& source_name) {
  if (LooksLikeJson(text)) return ParseJson(text, source_name);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(source_name, e.mark), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": malformed YAML: ", e.what()));
  }
  std::vector<YAML::Node> non_empty;
  for (const YAML::Node& d : docs) {
    if (d.IsDefined() && !d.IsNull()) non_empty.push_back(d);
  }
  if (non_empty.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": empty document"));
  }
  if (non_empty.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": expected one YAML document, found ", non_empty.size()));
  }
  try {
    return Convert(non_empty[0], source_name, 0);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", e.what()));
  }
}

}  // namespace kubetrain::base
