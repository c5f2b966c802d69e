// im2col and its adjoint col2im for NHWC images; host/device kernels
// (host_device.h), one output element per index so that a device runs one
// thread per element. Col2Im gathers (no atomics) and sums each input
// element's contributions in the order a scatter over the output pixels
// would, so it gives the same bits as runtime/nn/conv2d.cc's CPU Col2Im.
// Pure functions: thread-safe for disjoint ranges.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_IM2COL_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_IM2COL_H_

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

struct ConvShape {
  int64_t in_h, in_w, in_c, out_h, out_w, kernel, stride, pad;
  KT_HOST_DEVICE int64_t patch() const { return kernel * kernel * in_c; }
  KT_HOST_DEVICE int64_t pixels() const { return out_h * out_w; }
  KT_HOST_DEVICE int64_t in_image() const { return in_h * in_w * in_c; }
};

// col{images * out_h * out_w, patch}: element e in [begin, end) of the
// matrix for the images starting at x (x points at the first image).
KT_HOST_DEVICE inline void Im2Col(const ConvShape& g, int64_t begin, int64_t end, const float* x,
                                  float* col) {
  const int64_t patch = g.patch();
  for (int64_t e = begin; e < end; ++e) {
    const int64_t row = e / patch, p = e % patch;
    const int64_t b = row / g.pixels(), pix = row % g.pixels();
    const int64_t oh = pix / g.out_w, ow = pix % g.out_w;
    const int64_t kh = p / (g.kernel * g.in_c), kw = (p / g.in_c) % g.kernel, c = p % g.in_c;
    const int64_t ih = oh * g.stride - g.pad + kh, iw = ow * g.stride - g.pad + kw;
    col[e] = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w
                 ? x[b * g.in_image() + (ih * g.in_w + iw) * g.in_c + c]
                 : 0.0f;
  }
}

// gx element e in [begin, end) (images from gx's start) = the sum of the
// dcol entries im2col copied it to.
KT_HOST_DEVICE inline void Col2Im(const ConvShape& g, int64_t begin, int64_t end, const float* dcol,
                                  float* gx) {
  const int64_t patch = g.patch();
  for (int64_t e = begin; e < end; ++e) {
    const int64_t b = e / g.in_image(), r = e % g.in_image();
    const int64_t ih = r / (g.in_w * g.in_c), iw = (r / g.in_c) % g.in_w, c = r % g.in_c;
    float s = 0.0f;
    // Output pixels in ascending (oh, ow) order: descending kh, then kw.
    for (int64_t kh = g.kernel - 1; kh >= 0; --kh) {
      const int64_t th = ih + g.pad - kh;
      if (th < 0 || th % g.stride != 0 || th / g.stride >= g.out_h) continue;
      const int64_t oh = th / g.stride;
      for (int64_t kw = g.kernel - 1; kw >= 0; --kw) {
        const int64_t tw = iw + g.pad - kw;
        if (tw < 0 || tw % g.stride != 0 || tw / g.stride >= g.out_w) continue;
        const int64_t ow = tw / g.stride;
        const int64_t row = b * g.pixels() + oh * g.out_w + ow;
        s += dcol[row * patch + (kh * g.kernel + kw) * g.in_c + c];
      }
    }
    gx[e] = s;
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_IM2COL_H_
