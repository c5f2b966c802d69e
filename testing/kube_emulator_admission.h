// Validating admission webhooks, as kube-apiserver v1.20 calls them: the
// emulator stores admissionregistration.k8s.io/v1
// ValidatingWebhookConfigurations and, before it commits a write that one
// of their webhooks' rules matches, POSTs an admission.k8s.io/v1
// AdmissionReview to the webhook's clientConfig.url over HTTPS, verifying
// the certificate against clientConfig.caBundle (a clientConfig.service
// cannot be reached from here and counts as a failed call). What is
// emulated:
//   rules: operations (or *), apiGroups, apiVersions, resources ("x",
//     "x/scale", "x/*", "*", "*/*"), scope; namespaceSelector (a
//     namespace's labels); objectSelector (the object's or old object's);
//   the answer: allowed, or refused with the response's status: the client
//     gets its code (403 when none) and reason, and the message
//     "admission webhook \"<name>\" denied the request: <message>";
//   a failed call (no answer in timeoutSeconds, default 10; not 200; not an
//     AdmissionReview with the request's uid): failurePolicy Fail (the
//     default) refuses with 500 InternalError "failed calling webhook
//     \"<name>\": <why>", Ignore lets the write through.
// Not emulated: mutating webhooks, matchPolicy Equivalent's conversions,
// sideEffects and dry runs (a dry run calls the webhooks as any write).
//
// Free functions; thread-safe. They run on a request's thread with no lock
// of the store held where the store can help it (the scale subresource),
// or under it (a main-resource update): a webhook must not write through
// the emulator while it answers (the operator's does not).
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_ADMISSION_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_ADMISSION_H_

#include <map>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "testing/kube_emulator_store.h"

namespace kubetrain::testing {

// One write as admission sees it.
struct AdmissionAttributes {
  const ResourceType* rt = nullptr;
  std::string sub_resource;  // "" or "scale"
  std::string operation;     // "CREATE" "UPDATE" "DELETE"
  std::string ns, name;
  // The object's kind: the resource's own, or autoscaling/v1 Scale.
  std::string kind_group, kind_version, kind;
  nlohmann::json object, old_object;
  std::map<std::string, std::string> namespace_labels;
};

// Calls every webhook of `configurations` (stored
// ValidatingWebhookConfiguration objects) whose rules match `a`, in order;
// the first refusal (or failed call under failurePolicy Fail) is returned,
// nullopt when the write may go on.
std::optional<ApiResult> RunValidatingWebhooks(const nlohmann::json& configurations,
                                               const AdmissionAttributes& a);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_ADMISSION_H_
