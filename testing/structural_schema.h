// StructuralSchema: a CustomResourceDefinition's openAPIV3Schema applied the
// way kube-apiserver v1.20 applies it to custom-resource writes, for the API
// emulator (testing/kube_emulator.h). Loaded from the CRD manifest
// itself (crds/, tests/support/crds/), never hand-copied, so the emulator
// refuses what a real server refuses:
//   1. pruning: fields the schema does not declare are dropped, except below
//      x-kubernetes-preserve-unknown-fields; a null where the schema is not
//      `nullable: true` is dropped too;
//   2. defaulting: `default` fills absent fields (after the null pruning);
//   3. validation: type (an integral number counts as an integer), enum,
//      required, minimum/maximum (and exclusive*), minLength/maxLength,
//      minItems/maxItems, minProperties/maxProperties, format date-time.
// Causes name the field as the real server does: map keys are path
// segments, array indexes are not ("spec.containers.name"), and their
// messages are the server's (tests/support/testdata/crd-schema-real-server.txt).
// The order of several causes may differ from the server's (Go map order).
// x-kubernetes-validations (CEL) are not evaluated: v1.20 drops them.
//
// Immutable after loading; thread-safe.
#ifndef KUBETRAIN_TESTING_STRUCTURAL_SCHEMA_H_
#define KUBETRAIN_TESTING_STRUCTURAL_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kubetrain::testing {

// One entry of a 422's details.causes.
struct SchemaViolation {
  std::string reason;   // FieldValueRequired, FieldValueInvalid, FieldValueNotSupported ...
  std::string message;  // "Required value", "Invalid value: -1: ..."
  std::string field;    // "spec.replicaSpecs.Worker.replicas"
};

class StructuralSchema {
 public:
  // The schema of `version` (or of the storage version when empty) in a
  // CustomResourceDefinition manifest (YAML or JSON).
  static absl::StatusOr<StructuralSchema> FromCrdFile(const std::string& path,
                                                      const std::string& version = "");
  static absl::StatusOr<StructuralSchema> FromCrd(const nlohmann::json& crd,
                                                  const std::string& version = "");

  const std::string& group() const { return group_; }
  const std::string& plural() const { return plural_; }
  const std::string& kind() const { return kind_; }
  const std::string& version() const { return version_; }

  // Steps 1 and 2 on a whole object (apiVersion, kind and metadata are kept).
  void PruneAndDefault(nlohmann::json& object) const;
  // Step 3 on a whole object; empty when it is valid.
  std::vector<SchemaViolation> Validate(const nlohmann::json& object) const;

 private:
  StructuralSchema() = default;

  // subresources.scale's replicas paths ("" without the subresource): a
  // real server also checks that each holds an int64 in [0, 2^31) (its
  // ValidateScaleSpec/ValidateScaleStatus, with Go's NestedInt64 errors).
  std::vector<SchemaViolation> ValidateScalePath(const nlohmann::json& object,
                                                 const std::string& path) const;
  std::string group_, plural_, kind_, version_;
  nlohmann::json schema_;
  std::string spec_replicas_path_, status_replicas_path_;
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_STRUCTURAL_SCHEMA_H_
