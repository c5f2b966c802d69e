// Kubernetes resource quantities ("500m", "2", "0.5", "512Mi", "1Gi", "1e3",
// "129M") read as the node agent compares them: CPU in millicores, memory in
// bytes, rounded up as the kubelet rounds requests. Free functions;
// thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_QUANTITY_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_QUANTITY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kubetrain::node_agent {

// The quantity scaled by `scale` (1000 for millicores, 1 for bytes), rounded
// up. A malformed or negative quantity is an InvalidArgument naming it.
absl::StatusOr<int64_t> ParseQuantity(absl::string_view text, int64_t scale);
inline absl::StatusOr<int64_t> ParseCpuMillis(absl::string_view text) {
  return ParseQuantity(text, 1000);
}
inline absl::StatusOr<int64_t> ParseBytes(absl::string_view text) { return ParseQuantity(text, 1); }

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_QUANTITY_H_
