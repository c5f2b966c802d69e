// RendezvousIncomplete: rank 0's rendezvous gave up waiting for the world to
// form (--rendezvous-timeout), as a typed mark on the status rather than words
// in its message: the payload (kRendezvousIncompleteTypeUrl, value: the
// missing ranks' names) travels in the gRPC status details (grpc_util.h), and
// a joining rank tells it from its own call's deadline by the mark alone.
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_INCOMPLETE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_INCOMPLETE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace kubetrain::allreduce {

inline constexpr char kRendezvousIncompleteTypeUrl[] =
    "type.kubetrain.io/kubetrain.v1.RendezvousIncomplete";

// DeadlineExceeded with `message`, marked as the rendezvous' own timeout
// naming `missing` (comma-separated rank names).
inline absl::Status RendezvousIncompleteError(absl::string_view message,
                                              absl::string_view missing) {
  absl::Status s = absl::DeadlineExceededError(message);
  s.SetPayload(kRendezvousIncompleteTypeUrl, absl::Cord(missing));
  return s;
}

// Whether `s` is the rendezvous' own timeout (not a caller's deadline).
inline bool IsRendezvousIncomplete(const absl::Status& s) {
  return s.GetPayload(kRendezvousIncompleteTypeUrl).has_value();
}

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_INCOMPLETE_H_
