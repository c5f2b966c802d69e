// Patch application for the test Kubernetes API emulator: JSON merge patch
// (RFC 7386), JSON patch (RFC 6902) and a strategic-merge-patch subset for
// built-in kinds (lists merged by their patchMergeKey, primitive-list
// directives). Pure functions; thread-safe.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_PATCH_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_PATCH_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kubetrain::testing {

// RFC 7386. `patch` must be an object (callers check); never fails.
nlohmann::json ApplyMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 6902. `patch` must be an array. Any failing operation (test, missing
// path, unknown op) gives InvalidArgument.
absl::StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target,
                                              const nlohmann::json& patch);

// Strategic merge patch for core kinds: maps merge, null deletes, lists with a
// known merge key (containers/name, conditions/type, ports/containerPort, ...)
// merge by key honouring {"$patch":"delete"}, metadata.finalizers merge as a
// set, "$deleteFromPrimitiveList/<field>" and "$retainKeys" are understood;
// other lists are replaced.
nlohmann::json ApplyStrategicMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_PATCH_H_
