// PsDataClient: one worker's direct TCP data-plane connection to one
// parameter-server shard (data_plane_wire.h, ps_data_server.h). The shard
// advertises its data port at registration; the worker's steps then go over
// one TCP connection, opened on first use and kept: the gradient is sent
// straight from the caller's buffer and the parameters received straight
// into the caller's buffer, each checksummed piece by piece (fp16 steps
// pass through one piece of scratch each way, narrowed and widened). Any
// error closes the connection; the next step opens a new one.
//
// When the port cannot be reached on a connection's first try (a network
// policy that admits only the gRPC port, say), the data plane turns itself
// off for that port, says so once through TakeNotice(), and the caller uses
// gRPC instead. A new port (the shard restarted) is tried afresh.
//
// Thread-compatible: one step at a time, as PsShardClient.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_CLIENT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_CLIENT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/ps/data_plane_wire.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::ps {

struct PullReply {
  int64_t global_step = 0;
  uint64_t incarnation = 0;
  bool finished = false;
};

class PsDataClient {
 public:
  // `name` for messages ("ps-0"); `grpc_address` is the shard's "host:port":
  // the data plane is on the same host.
  PsDataClient(std::string name, std::string grpc_address, std::string token);

  // The data port the shard advertised at registration; 0 turns the data
  // plane off. A different port closes the connection and tries again.
  void SetPort(int port);
  // Steps go over the data plane (a port is known and was not given up).
  bool active() const { return port_ != 0 && !disabled_; }

  // PsShardClient::PushPull's contract: sends `values` (the shard's range at
  // `offset`) for `header`, then receives the range into `out` once the
  // shard allows `pull`; `*pushed` says whether the shard committed the push;
  // `written` (may be empty) runs once the push is sent. Unavailable when
  // the connection failed, DataLoss for a corrupt answer, else the shard's
  // own error. When the first connection to a port fails, active() turns
  // false (use gRPC) and the error is returned.
  //
  // `waiting` (may be empty) runs every 100 ms while the step waits on the
  // connection (a send the kernel cannot take, an answer not yet there); an
  // error from it closes the connection and is returned. PsShardClient
  // uses it to ask the shard over gRPC whether it is still the incarnation
  // this step was sent to: a shard that restarted while its old
  // connection's last bytes were lost (a cut link) would otherwise leave
  // the worker waiting for TCP keepalive, 30 s, longer than the new
  // incarnation's peer timeout.
  absl::StatusOr<PullReply> PushPull(const v1::PushHeader& header, std::span<const float> values,
                                     const v1::PullRequest& pull, std::span<float> out,
                                     int64_t offset, bool* pushed,
                                     const std::function<void()>& written,
                                     const exchange::IoCheck& waiting = {},
                                     data_plane::DType dtype = data_plane::DType::kF32,
                                     bool pipelined = false);
  void Close();
  // A line to log, once: the data plane was given up, or first connected.
  std::string TakeNotice();

 private:
  absl::Status Connect(int worker, uint64_t incarnation);
  // PushPull's pipelined step: the push is sent chunk by chunk from a
  // second thread while this one receives the shard's frames.
  absl::StatusOr<PullReply> PipelinedPushPull(const data_plane::StepHeader& h,
                                              std::span<const float> values, std::span<float> out,
                                              bool* pushed, const std::function<void()>& written,
                                              const exchange::IoCheck& waiting);
  // Reads an error answer's message and turns it into the shard's status.
  absl::Status ErrorFromAnswer(const data_plane::Answer& answer);

  const std::string name_, grpc_address_, token_;
  std::string host_;
  int port_ = 0;
  bool disabled_ = false;
  bool ever_connected_ = false;  // to this port
  bool pipelined_ = false;       // the step being sent is pipelined (for the notice)
  std::string notice_;
  exchange::TcpConnection conn_;
  std::vector<uint16_t> half_;  // one piece of fp16 values, either way
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_CLIENT_H_
