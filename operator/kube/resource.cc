#include "operator/kube/resource.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::kube {

std::string ResourceType::ApiVersion() const {
  if (group.empty()) return std::string(version);
  return absl::StrCat(group, "/", version);
}

std::string ResourceType::QualifiedName() const {
  if (group.empty()) return std::string(plural);
  return absl::StrCat(plural, ".", group);
}

std::string ResourcePath(const ResourceType& type, absl::string_view ns, absl::string_view name,
                         absl::string_view subresource) {
  std::string path = type.group.empty() ? absl::StrCat("/api/", type.version)
                                        : absl::StrCat("/apis/", type.group, "/", type.version);
  // Names come from flags and objects: escaped, so that a malformed one is
  // a 404/400 from the server rather than a malformed request line.
  if (type.namespaced && !ns.empty()) absl::StrAppend(&path, "/namespaces/", QueryEscape(ns));
  absl::StrAppend(&path, "/", type.plural);
  if (!name.empty()) {
    absl::StrAppend(&path, "/", QueryEscape(name));
    if (!subresource.empty()) absl::StrAppend(&path, "/", subresource);
  }
  return path;
}

std::string QueryEscape(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    absl::StrAppend(&out, out.empty() ? "?" : "&", key, "=", QueryEscape(value));
  }
  return out;
}

}  // namespace kubetrain::kube
