#include "runtime/exchange/host_replica_reducer.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kubetrain::exchange {

absl::StatusOr<const float*> HostReplicaReducer::OnHost(int r, const float* buffer, int64_t n,
                                                        std::vector<float>& staging) {
  ComputeDevice& d = *devices_[static_cast<size_t>(r)];
  if (d.host_memory()) return buffer;
  staging.resize(static_cast<size_t>(n));
  if (absl::Status s = d.CopyToHost(buffer, staging.data(), static_cast<size_t>(n) * sizeof(float));
      !s.ok()) {
    return s;
  }
  return staging.data();
}

absl::Status HostReplicaReducer::Write(int r, const float* host, float* buffer, int64_t n) {
  ComputeDevice& d = *devices_[static_cast<size_t>(r)];
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (d.host_memory()) {
    if (host != buffer) std::memcpy(buffer, host, bytes);
    return absl::OkStatus();
  }
  d.CopyToDevice(host, buffer, bytes);
  return d.Synchronize();
}

absl::Status HostReplicaReducer::Sum(int root, std::span<float* const> buffers, int64_t n) {
  if (absl::Status s = CheckAndDrain(devices_, root, buffers, n); !s.ok()) return s;
  sum_.resize(static_cast<size_t>(n));
  for (int r = 0; r < replicas(); ++r) {
    absl::StatusOr<const float*> src = OnHost(r, buffers[static_cast<size_t>(r)], n, staging_);
    if (!src.ok()) return src.status();
    const float* x = *src;
    float* acc = sum_.data();
    if (r == 0) {
      std::memcpy(acc, x, static_cast<size_t>(n) * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
    }
  }
  return Write(root, sum_.data(), buffers[static_cast<size_t>(root)], n);
}

absl::Status HostReplicaReducer::Broadcast(int root, std::span<float* const> buffers, int64_t n) {
  if (absl::Status s = CheckAndDrain(devices_, root, buffers, n); !s.ok()) return s;
  absl::StatusOr<const float*> src = OnHost(root, buffers[static_cast<size_t>(root)], n, sum_);
  if (!src.ok()) return src.status();
  for (int r = 0; r < replicas(); ++r) {
    if (r == root) continue;
    if (absl::Status s = Write(r, *src, buffers[static_cast<size_t>(r)], n); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::exchange
