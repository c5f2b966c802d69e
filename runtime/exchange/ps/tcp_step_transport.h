// TcpStepTransport: a worker's steps to one parameter-server shard over
// the shard's direct TCP data plane (tcp_wire_format.h, tcp_shard_server.h).
// The shard offers its data port at registration; steps then go over one
// TCP connection, opened on first use and kept: the gradient is sent
// straight from the caller's buffer and the parameters received straight
// into the caller's buffer, each checksummed piece by piece (fp16 steps
// pass through one piece of scratch each way, narrowed and widened). When
// the shard takes pipelined steps and the range has more than one chunk,
// the push goes chunk by chunk from a second thread while this one receives
// the parameters. Any error closes the connection; the next step opens a
// new one.
//
// When the port cannot be reached on a connection's first try (a network
// policy that admits only the gRPC port, say), the transport gives that
// port up: CanCarry turns false and the exchange's next choice (gRPC) takes
// the step. A new port (the shard restarted) is tried afresh.
//
// A step waiting over 1 s asks the shard over gRPC (ShardClient::GetStatus)
// whether it restarted: a shard that restarted while its old connection's
// last bytes were lost (a cut link) would otherwise leave the worker waiting
// for TCP keepalive, 30 s, longer than the new incarnation's peer timeout.
//
// Thread-compatible: one step at a time.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_STEP_TRANSPORT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_STEP_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/step_transport.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::ps {

class TcpStepTransport final : public StepTransport {
 public:
  // `shard` (borrowed; outlives this) names the shard, gives its host and
  // token, and answers whether it restarted.
  explicit TcpStepTransport(ShardClient& shard);
  TcpStepTransport(const TcpStepTransport&) = delete;
  TcpStepTransport& operator=(const TcpStepTransport&) = delete;

  StepTransportKind kind() const override { return StepTransportKind::kTcpDataPlane; }
  // RegisterResponse.data_port (0: none), .data_plane_fp16 and
  // .data_plane_pipeline. A different port closes the connection.
  void Offer(const v1::RegisterResponse& registration) override;
  // A port is offered and was not given up, and the plane takes `dtype`.
  bool CanCarry(v1::WireDType dtype) const override;
  std::string Describe() const override;
  // Unavailable when the connection failed (when it was the first to the
  // port, CanCarry turns false), DataLoss for a corrupt answer, else the
  // shard's own error with its refusal (ps_refusal.h); a shard found
  // restarted while the step waited is kStaleIncarnation.
  absl::StatusOr<PullReply> Step(const v1::PushHeader& header, std::span<const float> values,
                                 const v1::PullRequest& pull, std::span<float> out, int64_t offset,
                                 v1::WireDType dtype, bool* pushed,
                                 const std::function<void()>& written) override;
  void Close() override;

 private:
  std::string PortAddress() const;
  absl::Status Connect(int worker, uint64_t incarnation);
  // The wait check of a step sent to `incarnation`: fails once the shard
  // answers GetStatus with another incarnation.
  exchange::IoCheck StillTheSameShard(uint64_t incarnation);
  absl::StatusOr<PullReply> PlainStep(const data_plane::StepHeader& h,
                                      std::span<const float> values, std::span<float> out,
                                      bool* pushed, const std::function<void()>& written,
                                      const exchange::IoCheck& waiting);
  // The push is sent chunk by chunk from a second thread while this one
  // receives the shard's frames.
  absl::StatusOr<PullReply> PipelinedStep(const data_plane::StepHeader& h,
                                          std::span<const float> values, std::span<float> out,
                                          bool* pushed, const std::function<void()>& written,
                                          const exchange::IoCheck& waiting);
  // Reads an error answer's message and turns it into the shard's status.
  absl::Status ErrorFromAnswer(const data_plane::Answer& answer);

  ShardClient& shard_;
  const std::string& name_;
  std::string host_;
  int port_ = 0;
  bool fp16_ = false;            // the shard's plane takes fp16 steps
  bool pipeline_ = false;        // ... and pipelined sync steps
  int64_t range_length_ = 0;     // the shard's range, for Describe
  bool unreachable_ = false;     // port_ was given up
  bool ever_connected_ = false;  // to port_
  // The restart StillTheSameShard found during the current step, if any.
  absl::Status restarted_;
  exchange::TcpConnection conn_;  // the sender thread of a pipelined step writes, this one reads
  std::vector<uint16_t> half_;    // one piece of fp16 values, either way
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_STEP_TRANSPORT_H_
