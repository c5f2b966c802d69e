// LabelSelector: a parsed Kubernetes label selector ("app=a,tier in (x,y),!gone")
// or metav1.LabelSelector JSON, matched against an object's labels. Used by the
// client-side cache (index lookups) and by the test API emulator (list/watch
// filtering).
//
// Value type; thread-compatible (const methods may be called concurrently).
#ifndef KUBETRAIN_TESTING_LABEL_SELECTOR_H_
#define KUBETRAIN_TESTING_LABEL_SELECTOR_H_

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kubetrain::kube {

class LabelSelector {
 public:
  enum class Operator { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Operator op = Operator::kEquals;
    std::vector<std::string> values;  // sorted, unique
  };

  // Matches everything.
  LabelSelector() = default;

  // Kubernetes selector string syntax: "a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j".
  // The empty string selects everything. Invalid syntax, label keys (qualified
  // name with an optional DNS-1123 prefix, 63-character name part) or values
  // give InvalidArgument whose message names the offending part, in the
  // apiserver's wording where it has one.
  static absl::StatusOr<LabelSelector> Parse(std::string_view selector);
  // metav1.LabelSelector JSON: {matchLabels:{}, matchExpressions:[{key, operator:
  // In|NotIn|Exists|DoesNotExist, values}]}. null/{} selects everything.
  static absl::StatusOr<LabelSelector> FromJson(const nlohmann::json& selector);
  static LabelSelector FromMatchLabels(const std::map<std::string, std::string>& labels);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  // `labels_object` is metadata.labels; null or missing matches like no labels.
  bool Matches(const nlohmann::json& labels_object) const;
  bool Empty() const { return requirements_.empty(); }
  // Canonical form, sorted by key (then operator), parseable again by Parse.
  std::string String() const;
  // The single-valued equality requirements ("key=value"), for index lookups.
  std::vector<std::pair<std::string, std::string>> EqualityRequirements() const;
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  void Add(Requirement requirement);

  std::vector<Requirement> requirements_;  // sorted by key, then operator
};

// Validation helpers shared with the API emulator. Empty result = valid;
// otherwise the apiserver's message (without the "Invalid value" prefix).
std::string ValidateLabelKey(std::string_view key);
std::string ValidateLabelValue(std::string_view value);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_TESTING_LABEL_SELECTOR_H_
