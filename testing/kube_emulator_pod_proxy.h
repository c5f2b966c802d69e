// What kube-apiserver forwards for a pod, done the same way by the emulator:
//  - GET pods/{name}/log (container, follow, previous, tailLines,
//    limitBytes): to the kubelet of the pod's node, at the Node's preferred
//    address (Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP, as
//    --kubelet-preferred-address-types defaults; the kubernetes.io/hostname
//    label when there is no Hostname address) and its
//    status.daemonEndpoints.kubeletEndpoint.Port, over HTTPS without
//    verifying the certificate, as GET /containerLogs/{ns}/{pod}/{container};
//    the answer streams back chunk by chunk (follow), a kubelet error becomes
//    a Status (400 BadRequest with the kubelet's text, 404 NotFound);
//  - GET pods/{[scheme:]name[:port]}/proxy/{path}: to
//    {scheme}://{status.podIP}[:port]/{path}?{query} (port: the first
//    container port when none is named), status, Content-Type and body
//    passed through.
// A pod that is missing is 404; a pod without a node yet, or a container
// that is not named where the pod has several or is not the pod's, 400; a
// kubelet or pod that cannot be reached, 503 ServiceUnavailable.
//
// Stateless free functions; thread-safe.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_POD_PROXY_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_POD_PROXY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "testing/kube_emulator_http.h"
#include "testing/kube_emulator_store.h"

namespace kubetrain::testing {

// The address kube-apiserver dials for a node's kubelet. NotFound when the
// node has none of the preferred types.
absl::StatusOr<std::string> PreferredNodeAddress(const OrderedJson& node);

// The kubelet URL of a pods/log request, or the error answer.
struct KubeletLogTarget {
  std::string url;
  std::optional<ApiResult> error;
};
// `node` is null when the pod's node does not exist.
KubeletLogTarget KubeletLogUrl(const OrderedJson& pod, const OrderedJson* node,
                               const HttpRequest& req);

// Forwards pods/log for `pod` (its node as found, or null). Returns the error
// answer for the caller to write, or nullopt once it wrote the answer itself.
std::optional<ApiResult> ForwardPodLog(const OrderedJson& pod, const OrderedJson* node,
                                       const HttpRequest& req, HttpConnection& conn);
// Forwards pods/proxy: `name_port` is the path segment after pods/
// ("w-0:8090"), `subpath` what follows proxy ("/metrics"). Returns as
// ForwardPodLog.
std::optional<ApiResult> ForwardPodProxy(const OrderedJson& pod, const std::string& name_port,
                                         const std::string& subpath, const HttpRequest& req,
                                         HttpConnection& conn);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_POD_PROXY_H_
