// The first bytes on every allreduce data-plane connection: who is calling
// (rank), for which world (the rendezvous generation) and with what right
// (the job token). The acceptor refuses a connection that is not its left
// neighbour of this generation with the job token, so the token guards the
// data plane as it guards the gRPC services. Functions are thread-safe.
//
// The format (integers little-endian, whatever the host's order):
//   offset 0   u32  magic 0x4b545248 ("KTRH")
//          4   u32  rank of the caller
//          8   u64  generation (rank 0's rendezvous incarnation)
//         16   u32  token length N (at most 4096)
//         20   u32  reserved, 0
//         24   N bytes: the job token
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_HANDSHAKE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_HANDSHAKE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::allreduce {

absl::Status SendHandshake(exchange::TcpConnection& conn, int rank, uint64_t generation,
                           const std::string& token, const exchange::IoCheck& check);

// OK when the caller is `expected_rank` of `generation` with `token`;
// Unauthenticated for a wrong token (job_token.h), FailedPrecondition for another rank
// or generation, InvalidArgument for bytes that are no handshake. `check`
// bounds the wait (the caller's deadline).
absl::Status ReceiveHandshake(exchange::TcpConnection& conn, int expected_rank, uint64_t generation,
                              const std::string& token, const exchange::IoCheck& check);

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RING_HANDSHAKE_H_
