#include "runtime/exchange/allreduce/ring_handshake.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "base/little_endian.h"
#include "runtime/exchange/job_token.h"

namespace kubetrain::allreduce {
namespace {

constexpr uint32_t kHandshakeMagic = 0x4b545248;  // "KTRH"
constexpr uint32_t kMaxTokenBytes = 4096;

constexpr size_t kHeaderBytes = 24;

void PutU32(unsigned char* p, uint32_t v) { base::PutLittleEndian(p, v); }
void PutU64(unsigned char* p, uint64_t v) { base::PutLittleEndian(p, v); }
uint32_t GetU32(const unsigned char* p) { return base::GetLittleEndian<uint32_t>(p); }
uint64_t GetU64(const unsigned char* p) { return base::GetLittleEndian<uint64_t>(p); }

}  // namespace

absl::Status SendHandshake(exchange::TcpConnection& conn, int rank, uint64_t generation,
                           const std::string& token, const exchange::IoCheck& check) {
  unsigned char h[kHeaderBytes] = {};
  PutU32(h, kHandshakeMagic);
  PutU32(h + 4, static_cast<uint32_t>(rank));
  PutU64(h + 8, generation);
  PutU32(h + 16, static_cast<uint32_t>(token.size()));
  if (absl::Status s = conn.SendAll(h, sizeof(h), check); !s.ok()) return s;
  return conn.SendAll(token.data(), token.size(), check);
}

absl::Status ReceiveHandshake(exchange::TcpConnection& conn, int expected_rank, uint64_t generation,
                              const std::string& token, const exchange::IoCheck& check) {
  unsigned char h[kHeaderBytes];
  if (absl::Status s = conn.RecvAll(h, sizeof(h), check); !s.ok()) return s;
  const uint32_t magic = GetU32(h), rank = GetU32(h + 4), token_bytes = GetU32(h + 16);
  const uint64_t their_generation = GetU64(h + 8);
  if (magic != kHandshakeMagic || token_bytes > kMaxTokenBytes || GetU32(h + 20) != 0) {
    return absl::InvalidArgumentError("not a kubetrain allreduce handshake");
  }
  std::string theirs(token_bytes, '\0');
  if (absl::Status s = conn.RecvAll(theirs.data(), theirs.size(), check); !s.ok()) return s;
  if (!exchange::JobTokenAccepted(token, theirs)) return exchange::WrongJobTokenError();
  if (their_generation != generation || static_cast<int>(rank) != expected_rank) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " of generation ", their_generation,
                     " is not this ring's left neighbour (rank ", expected_rank, " of generation ",
                     generation, ")"));
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::allreduce
