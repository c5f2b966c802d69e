// For tests of flush-to-zero / denormals-are-zero (runtime/tensor/denormals.h):
// a scope in which the calling thread keeps subnormal values (both bits
// cleared, as a thread starts without kubetrain's main), and the values to
// feed it. Header-only; per thread.
#ifndef KUBETRAIN_TESTS_SUPPORT_DENORMAL_MODE_H_
#define KUBETRAIN_TESTS_SUPPORT_DENORMAL_MODE_H_

#include <cmath>
#include <limits>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kubetrain::testing {

// Whether this machine has the bits at all (x86-64); tests skip otherwise.
constexpr bool kHasDenormalControl =
#if defined(__x86_64__)
    true;
#else
    false;
#endif

// A subnormal float: below the smallest normal, above zero.
inline float Subnormal() { return std::numeric_limits<float>::min() / 64; }

inline bool IsSubnormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL; }

class ScopedKeepDenormals {
 public:
  ScopedKeepDenormals() {
#if defined(__x86_64__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ & ~((1u << 15) | (1u << 6)));
#endif
  }
  ~ScopedKeepDenormals() {
#if defined(__x86_64__)
    _mm_setcsr(saved_);
#endif
  }
  ScopedKeepDenormals(const ScopedKeepDenormals&) = delete;
  ScopedKeepDenormals& operator=(const ScopedKeepDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_DENORMAL_MODE_H_
