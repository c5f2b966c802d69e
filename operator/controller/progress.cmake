# The progress poller: status.progress of running TrainingJobs from the chief
# replica's /metrics page. Included from operator/controller/CMakeLists.txt;
# paths are relative to this file so it works from any including directory.

# Prometheus text exposition parser (no network).
kubetrain_library(prometheus_text
  HDRS "${CMAKE_CURRENT_LIST_DIR}/prometheus_text.h"
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/prometheus_text.cc"
  DEPS absl::status absl::statusor absl::strings)

# Depends on the Kubernetes client only (not kubetrain::controller), so the
# controller library may link it without a cycle.
find_package(CURL REQUIRED)
# Whether running jobs still progress, from what the poller reads.
kubetrain_library(stall_tracker
  HDRS "${CMAKE_CURRENT_LIST_DIR}/stall_tracker.h"
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/stall_tracker.cc"
  DEPS absl::synchronization absl::strings)
kubetrain_library(progress_poller
  HDRS "${CMAKE_CURRENT_LIST_DIR}/progress_poller.h" "${CMAKE_CURRENT_LIST_DIR}/world_membership.h"
  SOURCES "${CMAKE_CURRENT_LIST_DIR}/progress_poller.cc"
          "${CMAKE_CURRENT_LIST_DIR}/world_membership.cc"
  DEPS kubetrain::api kubetrain::prometheus_text kubetrain::stall_tracker kubetrain::kube CURL::libcurl
       nlohmann_json::nlohmann_json
       absl::flat_hash_map absl::synchronization absl::time absl::strings absl::status
       absl::statusor Threads::Threads)
