// Direct convolution for inputs with few channels (the first conv layer of
// an image model), where im2col + GEMM has too short an inner dimension
// (9 for 3x3 on one channel) for a GEMM to run well. NHWC images; weights
// are passed transposed to {kernel, kernel, in_c, filters} so that the
// filter loop is contiguous and vectorises. Each function covers the image
// range [begin, end) and sums in a fixed order. Pure functions: thread-safe
// for disjoint outputs.
#ifndef KUBETRAIN_RUNTIME_NN_DIRECT_CONV_H_
#define KUBETRAIN_RUNTIME_NN_DIRECT_CONV_H_

#include <cstdint>

namespace kubetrain::nn {

struct ConvGeometry {
  int64_t in_h, in_w, in_c, out_h, out_w, kernel, stride, pad, filters;
};

// y{out_h, out_w, filters} per image = bias + conv(x, w).
void DirectConvForward(const ConvGeometry& g, int64_t begin, int64_t end, const float* x,
                       const float* wt, const float* bias, float* y);

// dwt{kernel, kernel, in_c, filters} += sum over pixels of x-patch * gy and
// db{filters} += sum over pixels of gy.
void DirectConvParamGrad(const ConvGeometry& g, int64_t begin, int64_t end, const float* x,
                         const float* gy, float* dwt, float* db);

// Overwrites gx{in_h, in_w, in_c} per image with d(loss)/d(x).
void DirectConvInputGrad(const ConvGeometry& g, int64_t begin, int64_t end, const float* gy,
                         const float* wt, float* gx);

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_DIRECT_CONV_H_
