// What kubectl needs from an API server before it touches a resource, for the
// test Kubernetes API emulator's resources (ServedResources()): the legacy
// discovery documents (/api, /apis, /api/v1, /apis/<group>/<version>, in the
// shape kube-apiserver v1.20 answers them: names, kinds, verbs, shortNames,
// categories, subresources) and a minimal OpenAPI v3 (/openapi/v3 and one
// document per group-version) whose only content is each resource's PATCH
// operation declaring the fieldValidation parameter, so that kubectl 1.31
// leaves validation to the server instead of downloading schemas. The
// custom resources' shortNames, categories and printer columns come from
// their CRD manifests (ResourcePresentation::FromCrd).
//
// Value types and pure functions; thread-safe.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_DISCOVERY_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_DISCOVERY_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "testing/kube_emulator_scale.h"
#include "testing/kube_emulator_store.h"

namespace kubetrain::testing {

// A CRD's additionalPrinterColumns entry.
struct PrinterColumn {
  std::string name;
  std::string type;  // string, integer, number, boolean, date
  std::string format;
  std::string description;
  std::string json_path;
  int priority = 0;
};

struct ResourcePresentation {
  std::string singular;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<PrinterColumn> columns;  // custom resources only
  // The CRD version's subresources.scale (custom resources only): served
  // as <plural>/scale and listed in discovery.
  std::optional<ScaleSubresource> scale;

  // From a CustomResourceDefinition manifest (its served version `version`,
  // "" = the storage one). Returns the resource's GroupResource() with it.
  static absl::StatusOr<std::pair<std::string, ResourcePresentation>> FromCrd(
      const nlohmann::json& crd, const std::string& version = "");
};

// Presentations by GroupResource() ("pods", "trainingjobs.kubetrain.io").
using Presentations = std::map<std::string, ResourcePresentation>;

// The built-in resources' shortNames and categories, as kube-apiserver
// v1.20 lists them, plus `custom`.
Presentations WithBuiltinPresentations(Presentations custom);

// The discovery or OpenAPI document at `path` ("/api", "/apis", "/api/v1",
// "/apis/kubetrain.io/v1alpha1", "/openapi/v3", "/openapi/v3/api/v1", ...);
// nullopt for any other path. `server` is "host:port" for /api's
// serverAddressByClientCIDRs.
std::optional<OrderedJson> DiscoveryDocument(const std::string& path,
                                             const Presentations& presentations,
                                             const std::string& server);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_DISCOVERY_H_
