// One parameter-server shard on loopback for tests and benchmarks: a
// PsShard (sgd, lr 0.5, incarnation kIncarnation) behind its ShardSession,
// served over gRPC and, with `tcp`, the direct TCP data plane beside it.
// `advertise` (>= 0) is the data port told to workers instead of the plane's.
// The second constructor takes the shard's whole options and a fixed port,
// and restores the newest checkpoint of options.checkpoint_dir: a PS
// process a test can drop (as SIGKILL would: no final checkpoint) and start
// again at the same address.
#ifndef KUBETRAIN_TESTING_LOOPBACK_SHARD_H_
#define KUBETRAIN_TESTING_LOOPBACK_SHARD_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/check.h"
#include "base/clock.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/grpc_shard_server.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_shard_server.h"

namespace kubetrain::ps {

class LoopbackShard {
 public:
  static constexpr uint64_t kIncarnation = 4242;
  LoopbackShard(const std::string& mode, const std::string& token, bool tcp, int advertise = -1,
                bool fp16_plane = true, int num_workers = 2, bool pipeline = false,
                float momentum = 0) {
    PsShardOptions o;
    o.num_workers = num_workers;
    o.mode = *ExchangeMode::Parse(mode);
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = momentum;
    o.pipeline = pipeline;
    o.lr.base_lr = 0.5f;
    o.incarnation = kIncarnation;
    Serve(
        o, token, tcp, advertise, fp16_plane, 0, [](const std::string&) {}, /*restore=*/false);
  }
  // `log` gets the shard's lines; `port` 0 picks one.
  LoopbackShard(const PsShardOptions& options, int port, bool tcp, PsShard::Logger log,
                const std::string& token = "") {
    Serve(options, token, tcp, -1, true, port, std::move(log), /*restore=*/true);
  }
  ~LoopbackShard() {
    shard_->Abort(absl::UnavailableError("test over"));
    if (data_ != nullptr) data_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  // Stops both servers, as the PS process does when it exits.
  void StopServing() {
    if (data_ != nullptr) data_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  // Tells workers registering from now on to use this data port.
  void Advertise(int port) { service_->set_data_port(port); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::string data_address() const { return "127.0.0.1:" + std::to_string(data_->port()); }
  PsShard& shard() { return *shard_; }
  TcpShardServer& data() { return *data_; }
  // The checkpoint's step the second constructor restored, -1 for none.
  int64_t restored_step() const { return restored_step_; }

 private:
  void Serve(const PsShardOptions& o, const std::string& token, bool tcp, int advertise,
             bool fp16_plane, int port, PsShard::Logger log, bool restore) {
    shard_ = std::make_unique<PsShard>(o, clock_, std::move(log));
    if (restore) {  // before serving, as RunParameterServer does
      absl::StatusOr<int64_t> restored = shard_->RestoreFromCheckpoint();
      KT_CHECK(restored.ok()) << restored.status();
      restored_step_ = *restored;
    }
    session_ = std::make_unique<ShardSession>(*shard_, token);
    service_ = std::make_unique<GrpcShardServer>(*session_);
    if (tcp) {
      absl::StatusOr<std::unique_ptr<TcpShardServer>> d =
          TcpShardServer::Start(*session_, "127.0.0.1");
      KT_CHECK(d.ok()) << d.status();
      data_ = std::move(*d);
      service_->set_data_port(data_->port());
    }
    if (advertise >= 0) service_->set_data_port(advertise);
    service_->set_data_plane_fp16(fp16_plane);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    KT_CHECK(server_ != nullptr && port_ != 0) << "cannot listen on 127.0.0.1:" << port;
  }

  RealClock clock_;
  std::unique_ptr<PsShard> shard_;
  std::unique_ptr<ShardSession> session_;
  std::unique_ptr<GrpcShardServer> service_;
  std::unique_ptr<TcpShardServer> data_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int64_t restored_step_ = -1;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_TESTING_LOOPBACK_SHARD_H_
