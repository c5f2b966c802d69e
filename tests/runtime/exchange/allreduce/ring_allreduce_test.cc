// The TCP ring: sums equal a reference for 2, 3, 4 and 7 ranks at sizes from
// one element to 100 MB (sizes not divisible by the world included), every
// rank ends bit-identical, fp16 stays within its stated bound, broadcasts
// are exact, and a corrupt stream or a lost peer fails with a clear error.
#include "runtime/exchange/allreduce/ring_allreduce.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tensor/denormals.h"
#include "tests/runtime/exchange/allreduce/ring_test_util.h"
#include "tests/support/denormal_mode.h"

namespace kubetrain::allreduce {
namespace {

using testing_util::MakeRing;
using testing_util::OnEveryRank;

// Values whose sums are exact in float32, different on every rank.
float Value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * ((i * 7 + rank) % 33 - 16)) * 0.25f;
}

void ExpectExactSum(int world, int64_t n, RingOptions options = {}) {
  SCOPED_TRACE(absl::StrCat(world, " ranks, ", n, " elements"));
  auto ring = MakeRing(world, options);
  std::vector<std::vector<float>> data(static_cast<size_t>(world), std::vector<float>(n));
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) data[r][i] = Value(r, i);
  }
  std::vector<absl::Status> st = OnEveryRank(world, [&](int r) {
    return ring[static_cast<size_t>(r)]->AllreduceSum(data[static_cast<size_t>(r)], nullptr);
  });
  for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    float expected = 0;
    for (int r = 0; r < world; ++r) expected += Value(r, i);
    if (data[0][i] != expected) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(std::memcmp(data[0].data(), data[r].data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
  // Each rank sends 2(N-1)/N of the data, plus a 16-byte header a chunk.
  if (n >= world * 1024) {
    const double payload = 2.0 * (world - 1) / world * static_cast<double>(n) * 4;
    const int64_t chunk_elems = options.chunk_bytes / 4;
    const int64_t chunks = ((n + world - 1) / world + chunk_elems - 1) / chunk_elems;
    const int64_t headers = 16 * 2 * (world - 1) * chunks;
    EXPECT_GE(ring[0]->bytes_sent(), static_cast<int64_t>(payload * 0.99));
    EXPECT_LE(ring[0]->bytes_sent(), static_cast<int64_t>(payload * 1.01) + headers);
  }
}

class RingSizes : public ::testing::TestWithParam<int> {};

TEST_P(RingSizes, SumsEqualTheReferenceAtEverySize) {
  const int world = GetParam();
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{world - 1}, int64_t{world + 1},
                    int64_t{1000}, int64_t{(1 << 20) + 3}}) {
    if (n < 1) continue;
    ExpectExactSum(world, n);
  }
}

TEST_P(RingSizes, OneHundredMegabytesNotDivisibleByTheWorld) {
  ExpectExactSum(GetParam(), 25 * 1024 * 1024 + 1);  // 100 MB + 4 bytes
}

TEST_P(RingSizes, SmallChunksPipelineManySteps) {
  RingOptions o;
  o.chunk_bytes = 64;  // 16 floats a chunk: many chunks per segment
  ExpectExactSum(GetParam(), 10007, o);
}

INSTANTIATE_TEST_SUITE_P(Worlds, RingSizes, ::testing::Values(2, 3, 4, 7));

TEST(Ring, OneRankIsANoOp) {
  auto ring = MakeRing(1);
  std::vector<float> v = {1, 2, 3};
  ASSERT_TRUE(ring[0]->AllreduceSum(v, nullptr).ok());
  EXPECT_THAT(v, ::testing::ElementsAre(1, 2, 3));
}

TEST(Ring, Fp16StaysWithinItsBoundAndRanksAgree) {
  for (int world : {2, 4, 7}) {
    SCOPED_TRACE(absl::StrCat(world, " ranks"));
    RingOptions o;
    o.dtype = v1::WIRE_DTYPE_F16;
    o.chunk_bytes = 4096;
    auto ring = MakeRing(world, o);
    const int64_t n = 100003;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<std::vector<float>> data(world, std::vector<float>(n));
    std::vector<double> exact(n, 0), abs_sum(n, 0);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        // Mix magnitudes, down to the subnormal range of binary16.
        data[r][i] = u(rng) * std::pow(10.0f, static_cast<float>(i % 6) - 5);
        exact[i] += data[r][i];
        abs_sum[i] += std::fabs(data[r][i]);
      }
    }
    std::vector<absl::Status> st =
        OnEveryRank(world, [&](int r) { return ring[r]->AllreduceSum(data[r], nullptr); });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double bound = world * (std::ldexp(1.0, -11) * abs_sum[i] + std::ldexp(1.0, -25));
      const double err = std::fabs(data[0][i] - exact[i]);
      ASSERT_LE(err, bound) << "element " << i;
      worst = std::max(worst, err / bound);
    }
    EXPECT_GT(worst, 0) << "fp16 should round something";
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(std::memcmp(data[0].data(), data[r].data(), n * sizeof(float)), 0);
    }
    // Half the bytes of fp32 on the wire.
    EXPECT_LE(ring[0]->bytes_sent(),
              static_cast<int64_t>(2.0 * (world - 1) / world * n * 2) + 8192);
  }
}

// Both of a rank's threads (its sender, and the caller's thread while it
// receives and sums) flush subnormal values, whatever mode the caller's
// thread had: the sum of subnormal gradients is zero, and every read of the
// mode on either thread says so. A slow link (16 KB chunks at 64 KB/s, a
// quarter second each) makes the sender wait between chunks, and the
// receiver past its 100 ms poll, so both call the check on their threads.
TEST(Ring, EveryThreadFlushesSubnormals) {
  if (!kubetrain::testing::kHasDenormalControl) GTEST_SKIP() << "no MXCSR on this CPU";
  RingOptions o;
  o.chunk_bytes = 16 << 10;
  auto ring = MakeRing(2, o);
  ring[0]->set_max_send_rate(64 << 10);
  ring[1]->set_max_send_rate(64 << 10);
  constexpr int64_t kN = 16 << 10;  // 64 KB: each rank sends four 16 KB chunks
  std::vector<std::vector<float>> data(2, std::vector<float>(kN, kubetrain::testing::Subnormal()));
  std::mutex mu;
  std::vector<std::set<std::thread::id>> threads(2);
  std::vector<int> reads(2, 0), unflushed(2, 0);
  std::vector<bool> caller_kept(2, false);
  std::vector<absl::Status> st = OnEveryRank(2, [&](int r) {
    kubetrain::testing::ScopedKeepDenormals keep;
    const exchange::IoCheck check = [&, r] {
      std::lock_guard<std::mutex> l(mu);
      threads[r].insert(std::this_thread::get_id());
      ++reads[r];
      if (!DenormalsFlushedInThisThread()) ++unflushed[r];
      return absl::OkStatus();
    };
    absl::Status s =
        ring[static_cast<size_t>(r)]->AllreduceSum(data[static_cast<size_t>(r)], check);
    caller_kept[r] = !DenormalsFlushedInThisThread();
    return s;
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    EXPECT_EQ(threads[r].size(), 2u) << "rank " << r << ": the sender and the receiver checked";
    EXPECT_EQ(unflushed[r], 0) << "rank " << r << ": of " << reads[r] << " reads";
    EXPECT_TRUE(caller_kept[r]) << "rank " << r << ": the caller's mode is restored";
    int64_t nonzero = 0;
    for (float v : data[r]) nonzero += v != 0.0f;
    EXPECT_EQ(nonzero, 0) << "rank " << r << ": subnormal sums must flush to zero";
  }
}

TEST(Ring, BroadcastCopiesTheRootBitForBit) {
  const int world = 4;
  for (int root : {0, 2}) {
    auto ring = MakeRing(world, RingOptions{.chunk_bytes = 1024});
    const int64_t n = 70001;
    std::vector<std::vector<float>> data(world, std::vector<float>(n, -1.0f));
    for (int64_t i = 0; i < n; ++i) data[root][i] = static_cast<float>(i) * 1.000001f;
    data[root][5] = std::nanf("0x123");  // odd bit patterns survive
    std::vector<absl::Status> st =
        OnEveryRank(world, [&](int r) { return ring[r]->Broadcast(data[r], root, nullptr); });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(std::memcmp(data[r].data(), data[root].data(), n * sizeof(float)), 0)
          << "rank " << r << " root " << root;
    }
  }
}

TEST(Ring, ACorruptStreamFailsWithAClearError) {
  // Rank 1's left neighbour is a test socket that sends a bad chunk header.
  absl::StatusOr<exchange::TcpListener> l1 = exchange::TcpListener::Listen("127.0.0.1", 0);
  absl::StatusOr<exchange::TcpListener> l0 = exchange::TcpListener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(l1.ok() && l0.ok());
  absl::StatusOr<exchange::TcpConnection> to1 =
      exchange::TcpConnection::Connect(absl::StrCat("127.0.0.1:", l1->port()), 5, nullptr);
  absl::StatusOr<exchange::TcpConnection> from1 =
      exchange::TcpConnection::Connect(absl::StrCat("127.0.0.1:", l0->port()), 5, nullptr);
  ASSERT_TRUE(to1.ok() && from1.ok());
  absl::StatusOr<exchange::TcpConnection> in1 = l1->Accept(5, nullptr);
  absl::StatusOr<exchange::TcpConnection> drain = l0->Accept(5, nullptr);
  ASSERT_TRUE(in1.ok() && drain.ok());
  RingAllreduce rank1(1, 2, *std::move(from1), *std::move(in1), {});
  const uint32_t bad[4] = {0xdeadbeef, 1, 0, 16};
  ASSERT_TRUE(to1->SendAll(bad, sizeof(bad), nullptr).ok());
  std::vector<float> v(8, 1.0f);
  absl::Status s = rank1.AllreduceSum(v, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("out of step"));
  EXPECT_EQ(rank1.failed_peer(), 0);
}

TEST(Ring, ALostPeerIsNamedAndNobodyHangs) {
  const int world = 3;
  auto ring = MakeRing(world);
  std::vector<std::vector<float>> data(world, std::vector<float>(1 << 20, 1.0f));
  // Rank 2's process is gone: its sockets are closed. Rank 0 reads EOF on
  // its left link; rank 1's sends to it are reset.
  ring[2].reset();
  std::vector<absl::Status> st =
      OnEveryRank(2, [&](int r) { return ring[r]->AllreduceSum(data[r], nullptr); });
  EXPECT_EQ(st[0].code(), absl::StatusCode::kUnavailable) << st[0];
  EXPECT_EQ(st[1].code(), absl::StatusCode::kUnavailable) << st[1];
  EXPECT_EQ(ring[0]->failed_peer(), 2) << st[0];
  EXPECT_EQ(ring[1]->failed_peer(), 2) << st[1];
}

TEST(Ring, ACheckErrorAbandonsAWait) {
  auto ring = MakeRing(2);
  std::vector<float> v(1000, 1.0f);
  // Rank 1 never joins; rank 0's check gives up.
  int polls = 0;
  absl::Status s = ring[0]->AllreduceSum(v, [&]() -> absl::Status {
    return ++polls >= 3 ? absl::AbortedError("lost worker-1") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("worker-1"));
}

}  // namespace
}  // namespace kubetrain::allreduce
