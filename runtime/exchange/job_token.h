// The job token check, written once for every server a job's replicas talk
// to (the gRPC services, the PS data plane's hello, the allreduce ring's
// handshake): the same comparison, in time that does not depend on where two
// tokens differ, and the same error. Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_JOB_TOKEN_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_JOB_TOKEN_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kubetrain::exchange {

// Whether a peer presenting `presented` may talk to a server expecting
// `expected`. An empty `expected` (no token configured) accepts anyone.
// Constant time for tokens of equal length.
bool JobTokenAccepted(absl::string_view expected, absl::string_view presented);

// Unauthenticated: "missing or wrong job token (KUBETRAIN_JOB_TOKEN)".
absl::Status WrongJobTokenError();

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_JOB_TOKEN_H_
