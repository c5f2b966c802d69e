// The buffer conversions (F16C where the CPU has it) give the same bits as
// the scalar ones for every half and for floats across the whole range,
// including NaN payloads, infinities, subnormals and ragged tails.
#include "base/half_float.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace kubetrain::base {
namespace {

TEST(HalfFloat, EveryHalfWidensAsTheScalarDoes) {
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<float> out(in.size());
  HalvesToFloats(in.data(), in.size(), out.data());
  for (uint32_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(HalfToFloat(in[i])))
        << "half 0x" << std::hex << i;
  }
  // And every half survives the round trip bit for bit, NaNs quiet.
  std::vector<uint16_t> back(in.size());
  FloatsToHalves(out.data(), out.size(), back.data());
  for (uint32_t i = 0; i < in.size(); ++i) {
    const bool nan = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu) != 0;
    ASSERT_EQ(back[i], nan ? (i | 0x200u) : i) << "half 0x" << std::hex << i;
  }
}

TEST(HalfFloat, FloatsAcrossTheRangeNarrowAsTheScalarDoes) {
  // Every 251st bit pattern (odd stride: all exponents, mantissas, both
  // signs, NaN payloads), plus the rounding edges.
  std::vector<float> in;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 251) {
    in.push_back(std::bit_cast<float>(static_cast<uint32_t>(x)));
  }
  for (float f :
       {65504.0f, 65519.99f, 65520.0f, 0x1.0p-24f, 0x1.0p-25f, 0x1.8p-25f, 0x1.0p-14f,
        1.0f + 0x1.0p-11f, 1.0f + 0x1.8p-11f, std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
        std::numeric_limits<float>::denorm_min()}) {
    in.push_back(f);
    in.push_back(-f);
  }
  std::vector<uint16_t> out(in.size());
  FloatsToHalves(in.data(), in.size(), out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], FloatToHalf(in[i]))
        << "float 0x" << std::hex << std::bit_cast<uint32_t>(in[i]);
  }
}

TEST(HalfFloat, RaggedLengthsAndAccumulation) {
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 1000u}) {
    std::vector<float> in(n), acc(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      in[i] = std::ldexp(static_cast<float>(i) - 3.3f, static_cast<int>(i % 20) - 10);
      acc[i] = 0.25f * static_cast<float>(i);
    }
    std::vector<uint16_t> half(n + 1, 0xabcd);  // the slot after n stays untouched
    FloatsToHalves(in.data(), n, half.data());
    EXPECT_EQ(half[n], 0xabcd) << n;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(half[i], FloatToHalf(in[i])) << n << " " << i;
      want[i] = acc[i] + HalfToFloat(half[i]);
    }
    AddHalvesTo(half.data(), n, acc.data());
    EXPECT_EQ(acc, want) << n;
  }
}

TEST(HalfFloat, NonFiniteValuesStayNonFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {nan, -inf, inf, 1e6f, -1e6f, 1.0f, 2.0f, 3.0f, nan};
  std::vector<uint16_t> half(in.size());
  FloatsToHalves(in.data(), in.size(), half.data());
  std::vector<float> out(in.size());
  HalvesToFloats(half.data(), half.size(), out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], -inf);
  EXPECT_EQ(out[2], inf);
  EXPECT_EQ(out[3], inf);  // beyond 65504: overflow
  EXPECT_EQ(out[4], -inf);
  EXPECT_EQ(out[5], 1.0f);
  EXPECT_TRUE(std::isnan(out[8]));  // in the scalar tail
}

}  // namespace
}  // namespace kubetrain::base
