// The scale subresource of a custom resource whose CRD declares one
// (subresources.scale), as kube-apiserver v1.20 serves it
// (apiextensions-apiserver's ScaleREST): GET, PUT and PATCH of
// <resource>/<name>/scale with an autoscaling/v1 Scale
//   spec.replicas    <- specReplicasPath (GET: 500 when the field is absent)
//   status.replicas  <- statusReplicasPath (0 when absent)
//   status.selector  <- labelSelectorPath ("" when absent)
// A PUT (or a PATCH, applied to the current Scale: merge, strategic merge or
// JSON patch) writes spec.replicas at specReplicasPath through the resource's
// own update (its schema checks apply), with the Scale's resourceVersion as
// a precondition when it has one; without one a conflicting write is
// retried, as the server's GuaranteedUpdate does. `kubectl scale` works
// against it. Pure over the store; thread-safe as the store is.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_SCALE_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_SCALE_H_

#include <string>

#include "nlohmann/json.hpp"
#include "testing/kube_emulator_store.h"

namespace kubetrain::testing {

// A CRD version's subresources.scale; paths as written there (".spec.x.y").
struct ScaleSubresource {
  std::string spec_replicas_path;
  std::string status_replicas_path;
  std::string label_selector_path;  // may be empty
};

// The Scale of `object` (a stored custom resource); `found` says whether
// specReplicasPath holds a value.
OrderedJson ScaleOf(const nlohmann::json& object, const ScaleSubresource& scale, bool* found);

// Serves `method` (GET, PUT, PATCH) on <rt>/<name>/scale in `ns`.
ApiResult ServeScale(EmulatorStore& store, const ResourceType& rt, const ScaleSubresource& scale,
                     const std::string& ns, const std::string& name, const std::string& method,
                     const std::string& content_type, const std::string& body);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_SCALE_H_
