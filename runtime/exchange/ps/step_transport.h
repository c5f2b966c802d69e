// StepTransport: how one worker's parameter-server steps reach one shard.
// A step is one round trip: push the worker's gradient for the shard's
// range, then pull the range back once the shard's consistency rule allows
// it (sync: the barrier; ssp: the bound). Two implementations: the direct
// TCP data plane (tcp_step_transport.h) and the gRPC PushPull stream
// (grpc_step_transport.h). PsExchange keeps one of each per shard in one
// ordered list and gives each step to the first that can carry it
// (ps_exchange.cc, ChooseTransport). Registration, initialisation and the
// other calls stay on the shard's ShardClient (shard_client.h).
//
// Every transport fails a step with the same typed errors (StepErrorOf), so
// the exchange acts on none of their words. Thread-compatible: one step at
// a time per transport.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_STEP_TRANSPORT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_STEP_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.pb.h"

namespace kubetrain::ps {

// What a pull answers, besides the parameters.
struct PullReply {
  int64_t global_step = 0;
  uint64_t incarnation = 0;
  bool finished = false;
};

// Which transport (for tests and metrics; logs use Describe()).
enum class StepTransportKind { kTcpDataPlane, kGrpcStream };

class StepTransport {
 public:
  virtual ~StepTransport() = default;

  virtual StepTransportKind kind() const = 0;
  // What the shard offered at registration (its data port, what its plane
  // takes); every registration, so a restarted shard's new offer counts.
  virtual void Offer(const v1::RegisterResponse& registration) = 0;
  // Whether steps in `dtype` can go this way now: offered, allowed, and not
  // given up (a data port that could not be reached).
  virtual bool CanCarry(v1::WireDType dtype) const = 0;
  // For the log line that names the choice: "the data plane at host:port".
  virtual std::string Describe() const = 0;

  // One step: sends `values` (the shard's range, starting at `offset`) for
  // `header`, then receives the range into `out` once the shard allows
  // `pull`. `*pushed` says whether the shard committed the push (a retry
  // then only pulls); `written` (may be empty) runs once the push is sent.
  // Errors: see StepErrorOf. Any error closes the connection or stream; the
  // next step opens a new one.
  virtual absl::StatusOr<PullReply> Step(const v1::PushHeader& header,
                                         std::span<const float> values, const v1::PullRequest& pull,
                                         std::span<float> out, int64_t offset, v1::WireDType dtype,
                                         bool* pushed, const std::function<void()>& written) = 0;
  // Ends the open connection or stream, if any (after the last step).
  virtual void Close() = 0;
};

// How a step failed, as the exchange acts on it.
enum class StepError {
  kNone,
  // The shard restarted since the worker registered: register again.
  kShardRestarted,
  // The shard has no parameters (it came back empty): register again; the
  // initialising worker initialises it.
  kUninitialised,
  // The connection failed, timed out or carried a corrupt answer: retry
  // (a retried pull overwrites whatever a corrupt one left).
  kUnavailable,
  // The shard refused the step (a wrong size, a NaN, another job's token):
  // permanent.
  kRefused,
};

// The typed reading of a step's status: the refusal attached to it
// (ps_refusal.h), else its code.
StepError StepErrorOf(const absl::Status& s);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_STEP_TRANSPORT_H_
