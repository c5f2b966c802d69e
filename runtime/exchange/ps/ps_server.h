// RunParameterServer: the whole life of a PS replica process. Restores the
// newest valid checkpoint, serves workers, and ends:
//  - 0 when every training replica has finished (after a final checkpoint),
//    so the job can complete without anyone deleting the PS; with an
//    evaluator in the cluster, once it has been told (at most 30 s more);
//  - kExitPeerLost when a worker was silent longer than the peer timeout
//    (waiting workers get Aborted naming it);
//  - 128+sig on SIGTERM/SIGINT, after a final checkpoint and a clean stop
//    (logged as "checkpoint at step N written in X s (SIGTERM): PATH" and
//    handed to options.on_stop_checkpoint).
// Call from main before other threads start (it blocks SIGTERM/SIGINT in
// the calling thread so every gRPC thread inherits the mask).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "api/ports.h"
#include "base/clock.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

struct PsServerOptions {
  std::string listen_address = api::kDefaultListenAddress;
  PsShardOptions shard;
  std::string token;  // api::kEnvJobToken; empty disables the check
  double peer_timeout_seconds = 120;
  // Serve workers' steps on the direct TCP data plane too (TcpShardServer, on
  // an ephemeral port of the listen address's host, advertised at
  // registration); false: gRPC only (--ps-data-plane grpc).
  bool data_plane = true;
  // Set when the server is listening (tests use it to learn the port).
  std::function<void(int port)> on_listening;
  // Borrowed; nullptr records nothing. Also gets workers connected and
  // stalled peers from the server loop.
  metrics::RuntimeMetrics* metrics = nullptr;
  // After SIGTERM/SIGINT, once the shard's checkpoint is written: its step
  // and path (the caller's termination message). Not called when there is
  // no checkpoint directory or the write failed.
  std::function<void(int64_t step, const std::string& path)> on_stop_checkpoint;
};

// A worker silent this long (or half the peer timeout, if shorter) counts
// as a stalled peer in the metrics, long before it counts as lost.
inline constexpr double kStalledPeerSeconds = 30;

int RunParameterServer(const PsServerOptions& options, const Clock& clock,
                       const std::function<void(const std::string&)>& log);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SERVER_H_
