// Read-only accessors for Kubernetes objects held as nlohmann::json, and the
// few constructors every controller needs (object keys, owner references).
// Missing or mistyped fields read as empty values, never throw.
// Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_OBJECT_H_
#define KUBETRAIN_OPERATOR_KUBE_OBJECT_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kubetrain::kube {

using Json = nlohmann::json;

// The string at obj[a][b]..., or "" when absent or not a string.
std::string StringAt(const Json& obj, std::initializer_list<absl::string_view> path);
// The integer at obj[a][b]..., or `fallback` when absent or not an integer.
int64_t IntAt(const Json& obj, std::initializer_list<absl::string_view> path, int64_t fallback);

std::string Name(const Json& obj);
std::string Namespace(const Json& obj);
std::string Uid(const Json& obj);
std::string ResourceVersionOf(const Json& obj);
// True when both resourceVersions are integers and a > b. The API calls them
// opaque, but every kube-apiserver writes etcd revisions; client-go's
// MutationCache compares them the same way. False when not comparable.
bool NewerResourceVersion(const std::string& a, const std::string& b);
int64_t Generation(const Json& obj);
bool IsBeingDeleted(const Json& obj);  // metadata.deletionTimestamp set
std::map<std::string, std::string> Labels(const Json& obj);
std::string Label(const Json& obj, absl::string_view key);
std::string Annotation(const Json& obj, absl::string_view key);

// "ns/name", or "name" for cluster-scoped objects: the cache and queue key.
std::string ObjectKey(const Json& obj);
std::string ObjectKey(absl::string_view ns, absl::string_view name);
// Splits a key made by ObjectKey.
std::pair<std::string, std::string> SplitObjectKey(absl::string_view key);

// The uid of the ownerReference with controller=true, if any.
std::optional<std::string> ControllerUid(const Json& obj);

// An ownerReference naming `owner` as controller (blockOwnerDeletion true),
// as controller-runtime's SetControllerReference writes it.
Json ControllerReference(const Json& owner);

// RFC 3339 UTC with seconds ("2026-11-22T07:55:00Z") and with exactly six
// fractional digits ("...T07:55:00.123456Z", Kubernetes MicroTime).
std::string FormatTime(int64_t unix_micros);
std::string FormatMicroTime(int64_t unix_micros);
// Parses both forms (and any fraction length); nullopt when malformed.
std::optional<int64_t> ParseTimeMicros(absl::string_view text);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_OBJECT_H_
