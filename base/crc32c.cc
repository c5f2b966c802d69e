#include "base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kubetrain::base {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

// Raw (un-inverted) CRC state updates.
uint32_t RawPortable(uint32_t c, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t RawHw(uint32_t s, const unsigned char* p, size_t n) {
  uint64_t c = s;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

// Three independent lanes hide the instruction's 3-cycle latency; lanes are
// joined by "shift the CRC over kLane zero bytes", a linear map over GF(2)
// applied as a 32-column matrix.
constexpr size_t kLane = 4096;

class ZeroShift {
 public:
  ZeroShift() {
    static const unsigned char zeros[kLane] = {};
    for (int i = 0; i < 32; ++i) col_[i] = RawHw(1u << i, zeros, kLane);
  }
  uint32_t Apply(uint32_t x) const {
    uint32_t r = 0;
    for (int i = 0; i < 32; ++i) r ^= (0u - ((x >> i) & 1u)) & col_[i];
    return r;
  }

 private:
  uint32_t col_[32];
};

__attribute__((target("sse4.2"))) uint32_t RawHw3(uint32_t s, const unsigned char* p, size_t n) {
  static const ZeroShift shift;
  while (n >= 3 * kLane) {
    uint64_t a = s, b = 0, c = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      uint64_t x, y, z;
      std::memcpy(&x, p + i, 8);
      std::memcpy(&y, p + kLane + i, 8);
      std::memcpy(&z, p + 2 * kLane + i, 8);
      a = _mm_crc32_u64(a, x);
      b = _mm_crc32_u64(b, y);
      c = _mm_crc32_u64(c, z);
    }
    s = shift.Apply(shift.Apply(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
        static_cast<uint32_t>(c);
    p += 3 * kLane;
    n -= 3 * kLane;
  }
  return RawHw(s, p, n);
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t size) {
  return ~RawPortable(~crc, static_cast<const unsigned char*>(data), size);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  if (kHaveSse42) return ~RawHw3(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return Crc32cPortable(crc, data, size);
}

uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace kubetrain::base
