// `kubectl kubetrain describe JOB`: reads the job, its pods and the
// namespace's Events, and renders them (describe_view.h). Thread-compatible.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_COMMAND_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_COMMAND_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"

namespace kubetrain::kubectl_plugin {

// The screen; NotFound when the job does not exist. Events that cannot be
// listed (RBAC) leave the screen with a line saying so.
absl::StatusOr<std::string> DescribeJob(ClusterReader& api, const std::string& ns,
                                        const std::string& job, int64_t now_unix_micros);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_COMMAND_H_
