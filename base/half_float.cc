#include "base/half_float.h"

#include <bit>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kubetrain::base {

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs & 0x007fffffu) >> 13));  // quiet NaN
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf
  if (abs < 0x38800000u) {                                               // subnormal half (or zero)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // rounds to 0
    const uint32_t mant = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias exponent, round mantissa to 10 bits (nearest even).
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      x = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);  // NaN made quiet
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

namespace {

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void FloatsToHalvesF16c(const float* in, size_t n,
                                                            uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

__attribute__((target("avx,f16c"))) void HalvesToFloatsF16c(const uint16_t* in, size_t n,
                                                            float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void AddHalvesToF16c(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_cvtph_ps(h)));
  }
  for (; i < n; ++i) out[i] += HalfToFloat(in[i]);
}

const bool kHaveF16c = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#endif

}  // namespace

void FloatsToHalves(const float* in, size_t n, uint16_t* out) {
#if defined(__x86_64__)
  if (kHaveF16c) return FloatsToHalvesF16c(in, n, out);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

void HalvesToFloats(const uint16_t* in, size_t n, float* out) {
#if defined(__x86_64__)
  if (kHaveF16c) return HalvesToFloatsF16c(in, n, out);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void AddHalvesTo(const uint16_t* in, size_t n, float* out) {
#if defined(__x86_64__)
  if (kHaveF16c) return AddHalvesToF16c(in, n, out);
#endif
  for (size_t i = 0; i < n; ++i) out[i] += HalfToFloat(in[i]);
}

}  // namespace kubetrain::base
