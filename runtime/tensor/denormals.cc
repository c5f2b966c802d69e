#include "runtime/tensor/denormals.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kubetrain {
namespace {

#if defined(__x86_64__)
constexpr unsigned kFlushToZero = 1u << 15;      // MXCSR.FTZ: subnormal results become 0
constexpr unsigned kDenormalsAreZero = 1u << 6;  // MXCSR.DAZ: subnormal inputs read as 0
constexpr unsigned kBoth = kFlushToZero | kDenormalsAreZero;
#endif

unsigned ReadMode() {
#if defined(__x86_64__)
  return _mm_getcsr();
#else
  return 0;
#endif
}

void WriteMode(unsigned mode) {
#if defined(__x86_64__)
  _mm_setcsr(mode);
#else
  (void)mode;
#endif
}

}  // namespace

void FlushDenormalsInThisThread() {
#if defined(__x86_64__)
  const unsigned mode = ReadMode();
  if ((mode & kBoth) != kBoth) WriteMode(mode | kBoth);
#endif
}

bool DenormalsFlushedInThisThread() {
#if defined(__x86_64__)
  return (ReadMode() & kBoth) == kBoth;
#else
  return false;
#endif
}

ScopedFlushDenormals::ScopedFlushDenormals() : saved_(ReadMode()) { FlushDenormalsInThisThread(); }

ScopedFlushDenormals::~ScopedFlushDenormals() {
#if defined(__x86_64__)
  if (ReadMode() != saved_) WriteMode(saved_);
#endif
}

}  // namespace kubetrain
