// The data-plane handshake: only the expected left neighbour of this
// generation, with the job token, gets in.
#include "runtime/exchange/allreduce/ring_handshake.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kubetrain::allreduce {
namespace {

// A connected pair over loopback: {caller side, acceptor side}.
std::pair<exchange::TcpConnection, exchange::TcpConnection> Pair() {
  absl::StatusOr<exchange::TcpListener> l = exchange::TcpListener::Listen("127.0.0.1", 0);
  EXPECT_TRUE(l.ok()) << l.status();
  absl::StatusOr<exchange::TcpConnection> c =
      exchange::TcpConnection::Connect(absl::StrCat("127.0.0.1:", l->port()), 5, nullptr);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<exchange::TcpConnection> a = l->Accept(5, nullptr);
  EXPECT_TRUE(a.ok()) << a.status();
  return {*std::move(c), *std::move(a)};
}

absl::Status Try(int rank, uint64_t generation, const std::string& token) {
  auto [caller, acceptor] = Pair();
  EXPECT_TRUE(SendHandshake(caller, rank, generation, token, nullptr).ok());
  return ReceiveHandshake(acceptor, /*expected_rank=*/2, /*generation=*/77, "job-token", nullptr);
}

TEST(RingHandshake, TheLeftNeighbourWithTheTokenGetsIn) {
  EXPECT_TRUE(Try(2, 77, "job-token").ok());
}

TEST(RingHandshake, AWrongOrMissingTokenIsRefused) {
  EXPECT_EQ(Try(2, 77, "guess").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Try(2, 77, "").code(), absl::StatusCode::kUnauthenticated);
}

TEST(RingHandshake, AnotherRankOrGenerationIsRefused) {
  absl::Status s = Try(1, 77, "job-token");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 1 of generation 77"), absl::string_view::npos) << s;
  EXPECT_EQ(Try(2, 76, "job-token").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RingHandshake, BytesThatAreNoHandshakeAreRefused) {
  auto [caller, acceptor] = Pair();
  const char junk[32] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(caller.SendAll(junk, sizeof(junk), nullptr).ok());
  EXPECT_EQ(ReceiveHandshake(acceptor, 0, 1, "t", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// The bytes on the wire are the documented little-endian layout, whatever
// the host's byte order (ring_handshake.h).
TEST(RingHandshake, TheWireFormatIsLittleEndianAsDocumented) {
  auto [caller, acceptor] = Pair();
  ASSERT_TRUE(SendHandshake(caller, 3, 0x0102030405060708, "tk", nullptr).ok());
  unsigned char got[26];
  ASSERT_TRUE(acceptor.RecvAll(got, sizeof(got), nullptr).ok());
  const unsigned char want[26] = {'H', 'R', 'T', 'K', 3, 0, 0, 0, 8, 7, 6, 5,   4,
                                  3,   2,   1,   2,   0, 0, 0, 0, 0, 0, 0, 't', 'k'};
  for (size_t i = 0; i < sizeof(want); ++i) EXPECT_EQ(got[i], want[i]) << "byte " << i;
}

TEST(RingHandshake, ANonZeroReservedFieldIsNoHandshake) {
  auto [caller, acceptor] = Pair();
  unsigned char h[24] = {'H', 'R', 'T', 'K', 2, 0, 0, 0, 77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  ASSERT_TRUE(caller.SendAll(h, sizeof(h), nullptr).ok());
  EXPECT_EQ(ReceiveHandshake(acceptor, 2, 77, "", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingHandshake, ASilentCallerIsDroppedAtTheCallersDeadline) {
  auto [caller, acceptor] = Pair();
  int polls = 0;
  absl::Status s = ReceiveHandshake(acceptor, 0, 1, "t", [&]() -> absl::Status {
    return ++polls > 2 ? absl::DeadlineExceededError("handshake timed out") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace kubetrain::allreduce
