#include "runtime/exchange/allreduce/ring_handshake.h"

#include "absl/strings/str_cat.h"
#include "runtime/exchange/job_token.h"

namespace kubetrain::allreduce {
namespace {

constexpr uint32_t kHandshakeMagic = 0x4b545248;  // "KTRH"
constexpr uint32_t kMaxTokenBytes = 4096;

struct Handshake {
  uint32_t magic;
  uint32_t rank;
  uint64_t generation;
  uint32_t token_bytes;
  uint32_t reserved;
};
static_assert(sizeof(Handshake) == 24);

}  // namespace

absl::Status SendHandshake(exchange::TcpConnection& conn, int rank, uint64_t generation,
                           const std::string& token, const exchange::IoCheck& check) {
  Handshake h{kHandshakeMagic, static_cast<uint32_t>(rank), generation,
              static_cast<uint32_t>(token.size()), 0};
  if (absl::Status s = conn.SendAll(&h, sizeof(h), check); !s.ok()) return s;
  return conn.SendAll(token.data(), token.size(), check);
}

absl::Status ReceiveHandshake(exchange::TcpConnection& conn, int expected_rank, uint64_t generation,
                              const std::string& token, const exchange::IoCheck& check) {
  Handshake got{};
  if (absl::Status s = conn.RecvAll(&got, sizeof(got), check); !s.ok()) return s;
  if (got.magic != kHandshakeMagic || got.token_bytes > kMaxTokenBytes) {
    return absl::InvalidArgumentError("not a kubetrain allreduce handshake");
  }
  std::string theirs(got.token_bytes, '\0');
  if (absl::Status s = conn.RecvAll(theirs.data(), theirs.size(), check); !s.ok()) return s;
  if (!exchange::JobTokenAccepted(token, theirs)) return exchange::WrongJobTokenError();
  if (got.generation != generation || static_cast<int>(got.rank) != expected_rank) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", got.rank, " of generation ", got.generation,
                     " is not this ring's left neighbour (rank ", expected_rank, " of generation ",
                     generation, ")"));
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::allreduce
