// IEEE binary16 conversion for gradients on the wire (`--wire-dtype fp16`,
// parameter servers and allreduce): round-to-nearest-even, relative error
// <= 2^-11 for normal values, overflow to inf, NaN kept. Pure functions;
// thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_HALF_FLOAT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_HALF_FLOAT_H_

#include <cstdint>

namespace kubetrain::exchange {

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_HALF_FLOAT_H_
