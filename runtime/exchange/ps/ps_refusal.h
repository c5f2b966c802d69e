// PsRefusal: the refusals of a parameter server that a worker acts on, as a
// typed value instead of words in a status message. The code that refuses
// attaches it to its absl::Status as a payload (WithPsRefusal); each
// transport carries it as a typed field (gRPC: a kubetrain.v1.PsRefusalDetail
// in the status details, grpc_util.h; the direct TCP data plane: the refusal
// byte of its Answer, tcp_wire_format.h); the worker reads it with
// PsRefusalOf. Messages stay for people: nothing parses them.
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_REFUSAL_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_REFUSAL_H_

#include <cstdint>

#include "absl/status/status.h"

namespace kubetrain::ps {

// Values are those of kubetrain.v1.PsRefusal and of the data plane's refusal
// byte; they never change.
enum class PsRefusal : uint8_t {
  kNone = 0,
  // The shard restarted since the caller registered (its incarnation is
  // another): register again.
  kStaleIncarnation = 1,
  // The shard has no parameters (it came back empty): register again, and
  // the initialising worker initialises it.
  kUninitialised = 2,
};
inline constexpr uint8_t kMaxPsRefusal = 2;

// The absl::Status payload's type URL; its value is a serialized
// kubetrain.v1.PsRefusalDetail.
inline constexpr char kPsRefusalTypeUrl[] = "type.kubetrain.io/kubetrain.v1.PsRefusalDetail";

// `s` with `r` attached (kNone removes it). An OK status stays OK.
absl::Status WithPsRefusal(absl::Status s, PsRefusal r);
// The refusal attached to `s`; kNone when there is none or it does not parse.
PsRefusal PsRefusalOf(const absl::Status& s);

// FailedPrecondition, kStaleIncarnation: the shard is at `incarnation`, the
// caller registered with `caller`.
absl::Status StaleIncarnationError(uint64_t incarnation, uint64_t caller);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_REFUSAL_H_
