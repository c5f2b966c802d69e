#include "base/little_endian.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace kubetrain::base {
namespace {

TEST(LittleEndian, LeastSignificantByteFirst) {
  std::array<unsigned char, 8> b{};
  PutLittleEndian<uint32_t>(b.data(), 0x11223344u);
  EXPECT_EQ(b[0], 0x44);
  EXPECT_EQ(b[1], 0x33);
  EXPECT_EQ(b[2], 0x22);
  EXPECT_EQ(b[3], 0x11);
  EXPECT_EQ(GetLittleEndian<uint32_t>(b.data()), 0x11223344u);
  PutLittleEndian<uint64_t>(b.data(), 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(b[7], 0x01);
  EXPECT_EQ(GetLittleEndian<uint64_t>(b.data()), 0x0102030405060708ull);
}

TEST(LittleEndian, SignedValuesRoundTrip) {
  std::array<unsigned char, 8> b{};
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{-123456789012345}, INT64_MIN, INT64_MAX}) {
    PutLittleEndian(b.data(), v);
    EXPECT_EQ(GetLittleEndian<int64_t>(b.data()), v);
  }
  PutLittleEndian<int32_t>(b.data(), -2);
  EXPECT_EQ(b[0], 0xfe);
  EXPECT_EQ(b[3], 0xff);
  EXPECT_EQ(GetLittleEndian<int32_t>(b.data()), -2);
}

}  // namespace
}  // namespace kubetrain::base
