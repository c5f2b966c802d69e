// Kubernetes object-name rules (k8s.io/apimachinery/pkg/util/validation):
// which strings may name a namespace, an object or a Service.
#ifndef KUBETRAIN_BASE_OBJECT_NAMES_H_
#define KUBETRAIN_BASE_OBJECT_NAMES_H_

#include <string_view>

namespace kubetrain::base {

// [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters: namespaces, labels.
bool IsDns1123Label(std::string_view s);
// DNS-1123 labels joined by '.', at most 253 characters: most object names
// (Pods, Leases, Secrets).
bool IsDns1123Subdomain(std::string_view s);
// [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters: Service names.
bool IsDns1035Label(std::string_view s);

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_OBJECT_NAMES_H_
