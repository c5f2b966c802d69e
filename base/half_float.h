// IEEE binary16 conversion for gradients on the wire (`--wire-dtype fp16`,
// parameter servers and allreduce): round-to-nearest-even, relative error
// <= 2^-11 for normal values, overflow to inf, NaN kept (quiet, with the top
// payload bits, as the x86 F16C instructions do). Pure functions;
// thread-safe.
//
// The span functions convert whole buffers, 8 values per instruction with
// F16C where the CPU has it (checked once at start), the scalar functions
// elsewhere; both give the same bits for every input.
#ifndef KUBETRAIN_BASE_HALF_FLOAT_H_
#define KUBETRAIN_BASE_HALF_FLOAT_H_

#include <cstddef>
#include <cstdint>

namespace kubetrain::base {

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// out[i] = FloatToHalf(in[i]) for i < n.
void FloatsToHalves(const float* in, size_t n, uint16_t* out);
// out[i] = HalfToFloat(in[i]) for i < n.
void HalvesToFloats(const uint16_t* in, size_t n, float* out);
// out[i] += HalfToFloat(in[i]) for i < n (a reduction's receive side).
void AddHalvesTo(const uint16_t* in, size_t n, float* out);

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_HALF_FLOAT_H_
