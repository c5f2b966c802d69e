#include "runtime/exchange/ps/ps_server.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/exit_codes.h"
#include "base/stop_signals.h"
#include "runtime/exchange/ps/grpc_shard_server.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_shard_server.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::ps {

int RunParameterServer(const PsServerOptions& options, const Clock& clock,
                       const std::function<void(const std::string&)>& log) {
  base::StopSignals::Block();  // taken below, by the loop's sleep

  PsShardOptions shard_options = options.shard;
  if (shard_options.incarnation == 0) {
    shard_options.incarnation =
        std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
  }
  PsShard shard(shard_options, clock, log, options.metrics);
  absl::StatusOr<int64_t> restored = shard.RestoreFromCheckpoint();
  if (!restored.ok()) {
    log(absl::StrCat("error: cannot restore: ", restored.status().message()));
    return kExitPermanent;
  }
  ShardSession session(shard, options.token, options.metrics);
  GrpcShardServer service(session);
  std::unique_ptr<TcpShardServer> data_server;
  if (options.data_plane) {
    std::string host;
    int ignored = 0;
    if (absl::Status s = exchange::SplitHostPort(options.listen_address, &host, &ignored);
        !s.ok()) {
      log(absl::StrCat("error: ", s.message()));
      return kExitPermanent;
    }
    absl::StatusOr<std::unique_ptr<TcpShardServer>> d = TcpShardServer::Start(session, host);
    if (!d.ok()) {
      log(absl::StrCat("error: ", d.status().message()));
      return kExitPermanent;
    }
    data_server = std::move(*d);
    service.set_data_port(data_server->port());
  }

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default: two servers given the same port would
  // then both bind and split the connections between them. Fail loudly.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  exchange::SetBulkTransferArgs(builder);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    log(absl::StrCat("error: cannot listen on ", options.listen_address));
    return kExitPermanent;
  }
  log(absl::StrCat("parameter server shard ", shard_options.shard_index, "/",
                   shard_options.num_shards, " listening on port ", port,
                   data_server != nullptr
                       ? absl::StrCat(" (data plane on port ", data_server->port(), ")")
                       : std::string(" (gRPC only)"),
                   " mode=", shard_options.mode.ToString(), " workers=", shard_options.num_workers,
                   *restored >= 0 ? absl::StrCat(" resumed at step ", *restored) : " fresh"));
  if (shard_options.pipeline) {
    log(shard.pipelined() && data_server != nullptr
            ? "pipelined sync steps: on (chunks applied and sent back as they arrive)"
            : absl::StrCat("pipelined sync steps: off despite --ps-pipeline (",
                           data_server == nullptr ? "no data plane"
                           : shard_options.mode.kind != ExchangeMode::kSync
                               ? "only sync mode pipelines"
                               : "backup workers (--replicas-to-aggregate) take whole gradients",
                           ")"));
  }
  if (options.on_listening) options.on_listening(port);

  int exit_code = kExitSuccess;
  int stop_signal = 0;
  // After the workers finish, an evaluator (expected from the cluster spec,
  // or seen polling) gets up to this long to be told so before the PS goes
  // away: it may be between evaluations or still starting, which on a loaded
  // machine can take as long as any peer is allowed to be missing.
  const double kObserverLingerSeconds = std::max(30.0, options.peer_timeout_seconds);
  double finished_at = -1;
  const double stalled_after =
      std::min(kStalledPeerSeconds, std::max(options.peer_timeout_seconds / 2, 0.1));
  while (true) {
    if (options.metrics != nullptr) {
      options.metrics->SetWorkersConnected(shard.ConnectedWorkers());
      options.metrics->SetStalledPeers(static_cast<int>(shard.SilentWorkers(stalled_after).size()));
      options.metrics->SetGlobalStep(shard.global_step());
    }
    const int sig = base::StopSignals::Wait(absl::Milliseconds(200));
    if (sig > 0) {
      log(absl::StrCat("received signal ", sig, "; checkpointing and stopping"));
      exit_code = ExitForSignal(sig);
      stop_signal = sig;
      break;
    }
    if (shard.finished()) {
      if (finished_at < 0) finished_at = clock.NowSeconds();
      if (!shard.ObserverWaitingForTheEnd() ||
          clock.NowSeconds() - finished_at > kObserverLingerSeconds) {
        log("every worker finished; final checkpoint and exit");
        break;
      }
      continue;
    }
    std::vector<std::string> silent = shard.SilentWorkers(options.peer_timeout_seconds);
    if (!silent.empty()) {
      const std::string msg =
          absl::StrCat("peer lost: ", absl::StrJoin(silent, ", "), " silent for more than ",
                       options.peer_timeout_seconds, "s");
      log(absl::StrCat("error: ", msg));
      shard.Abort(absl::AbortedError(msg));
      exit_code = kExitPeerLost;
      break;
    }
  }
  if (!shard_options.checkpoint_dir.empty()) {
    const double t0 = clock.NowSeconds();
    int64_t step = 0;
    absl::StatusOr<std::string> path = shard.WriteCheckpointNow(&step);
    if (!path.ok()) {
      log(absl::StrCat("final checkpoint skipped: ", path.status().message()));
    } else if (stop_signal != 0) {
      log(absl::StrFormat("checkpoint at step %d written in %.2f s (%s): %s", step,
                          clock.NowSeconds() - t0, stop_signal == SIGTERM ? "SIGTERM" : "SIGINT",
                          *path));
      if (options.on_stop_checkpoint) options.on_stop_checkpoint(step, *path);
    }
  }
  shard.Abort(absl::UnavailableError("parameter server is shutting down"));
  if (data_server != nullptr) data_server->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  const v1::StatusResponse st = shard.Status();
  log(absl::StrCat("stats global_step=", st.global_step(), " applied=", st.applied_pushes(),
                   " stale=", st.stale_pushes(), " rejected=", st.rejected_pushes(),
                   " max_ssp_lead=", st.max_ssp_lead()));
  log(absl::StrCat("parameter server stopped, exit code ", exit_code));
  return exit_code;
}

}  // namespace kubetrain::ps
