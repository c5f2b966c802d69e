// Inverted-dropout masks from a counter-based hash: element i of call c
// with seed s is kept when the top 24 bits of SplitMix64(base + i), base =
// SplitMix64(s ^ SplitMix64(c)), are >= rate * 2^24. The mask of an element
// depends only on (seed, call, i), so any split of the range, on any device,
// gives the same bits. Host/device kernels (host_device.h); pure functions.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_DROPOUT_MASK_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_DROPOUT_MASK_H_

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

KT_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct DropoutParams {
  uint64_t base = 0;       // DropoutBase(seed, call)
  uint64_t threshold = 0;  // rate * 2^24
  float scale = 1.0f;      // 1 / (1 - rate)
  // When set, the call number is read from here (the same memory as x: a
  // captured step's StepScalars::forwards) and base is made from it and
  // `seed` in the kernel, giving the same mask as MakeDropoutParams would.
  const uint64_t* call_from = nullptr;
  uint64_t seed = 0;
};

KT_HOST_DEVICE inline uint64_t DropoutBase(uint64_t seed, uint64_t call) {
  return SplitMix64(seed ^ SplitMix64(call));
}

inline DropoutParams MakeDropoutParams(uint64_t seed, uint64_t call, float rate) {
  DropoutParams p;
  p.base = DropoutBase(seed, call);
  p.seed = seed;
  p.threshold = static_cast<uint64_t>(static_cast<double>(rate) * (1 << 24));
  p.scale = 1.0f / (1.0f - rate);
  return p;
}

// mask[i] = scale or 0, y[i] = x[i] * mask[i] for i in [begin, end).
KT_HOST_DEVICE inline void DropoutForward(const DropoutParams& p, int64_t begin, int64_t end,
                                          const float* x, float* mask, float* y) {
  // Locals: y may alias p.scale.
  const uint64_t base = p.call_from != nullptr ? DropoutBase(p.seed, *p.call_from) : p.base;
  const uint64_t threshold = p.threshold;
  const float scale = p.scale;
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t r = SplitMix64(base + static_cast<uint64_t>(i)) >> 40;
    mask[i] = r >= threshold ? scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_DROPOUT_MASK_H_
