// Max-pool forward and backward for NHWC images, one image per call over the
// image range [begin, end); host/device kernels
// (runtime/tensor/kernels/host_device.h). Pure functions: thread-safe for
// disjoint image ranges.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_MAX_POOL_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_MAX_POOL_H_

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

struct MaxPoolGeometry {
  int64_t in_h, in_w, channels, out_h, out_w, size, stride;
  KT_HOST_DEVICE int64_t in_image() const { return in_h * in_w * channels; }
  KT_HOST_DEVICE int64_t out_image() const { return out_h * out_w * channels; }
};

// For images [begin, end): y = the window maximum per output element and
// argmax = its offset within the image (the first one on ties; 0 when every
// input is NaN, with y = -inf).
KT_HOST_DEVICE inline void MaxPoolForward(const MaxPoolGeometry& g, int64_t begin, int64_t end,
                                          const float* x, float* y, int32_t* argmax) {
  const int64_t c_n = g.channels;
  for (int64_t b = begin; b < end; ++b) {
    const float* xb = x + b * g.in_image();
    float* yb = y + b * g.out_image();
    int32_t* ab = argmax + b * g.out_image();
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* yo = yb + (oh * g.out_w + ow) * c_n;
        int32_t* ao = ab + (oh * g.out_w + ow) * c_n;
        for (int64_t c = 0; c < c_n; ++c) {
          yo[c] = -__builtin_huge_valf();
          ao[c] = 0;
        }
        for (int64_t kh = 0; kh < g.size; ++kh) {
          for (int64_t kw = 0; kw < g.size; ++kw) {
            const int32_t off =
                static_cast<int32_t>(((oh * g.stride + kh) * g.in_w + (ow * g.stride + kw)) * c_n);
            const float* xi = xb + off;
            // Branch-free so that the channel loop vectorises.
            for (int32_t c = 0; c < static_cast<int32_t>(c_n); ++c) {
              const float v = xi[c], best = yo[c];
              const int32_t more = -static_cast<int32_t>(v > best);  // all ones or zero
              yo[c] = v > best ? v : best;
              ao[c] = ((off + c) & more) | (ao[c] & ~more);
            }
          }
        }
      }
    }
  }
}

// For images [begin, end): gx = 0, then gx[argmax] += gy per output element.
KT_HOST_DEVICE inline void MaxPoolBackward(const MaxPoolGeometry& g, int64_t begin, int64_t end,
                                           const float* gy, const int32_t* argmax, float* gx) {
  for (int64_t b = begin; b < end; ++b) {
    float* gxb = gx + b * g.in_image();
    const float* gyb = gy + b * g.out_image();
    const int32_t* ab = argmax + b * g.out_image();
    for (int64_t i = 0; i < g.in_image(); ++i) gxb[i] = 0.0f;
    for (int64_t i = 0; i < g.out_image(); ++i) gxb[ab[i]] += gyb[i];
  }
}

// One output element per index o in [begin, end) over the whole batch
// (image o / out_image): the same result as MaxPoolForward, for devices
// that run one thread per element.
KT_HOST_DEVICE inline void MaxPoolForwardElements(const MaxPoolGeometry& g, int64_t begin,
                                                  int64_t end, const float* x, float* y,
                                                  int32_t* argmax) {
  const int64_t c_n = g.channels;
  for (int64_t o = begin; o < end; ++o) {
    const int64_t b = o / g.out_image(), r = o % g.out_image();
    const int64_t oh = r / (g.out_w * c_n), ow = (r / c_n) % g.out_w, c = r % c_n;
    const float* xb = x + b * g.in_image();
    float best = -__builtin_huge_valf();
    int32_t arg = 0;
    for (int64_t kh = 0; kh < g.size; ++kh) {
      for (int64_t kw = 0; kw < g.size; ++kw) {
        const int32_t off =
            static_cast<int32_t>(((oh * g.stride + kh) * g.in_w + (ow * g.stride + kw)) * c_n + c);
        const float v = xb[off];
        if (v > best) {
          best = v;
          arg = off;
        }
      }
    }
    y[o] = best;
    argmax[o] = arg;
  }
}

// One input-gradient element per index e in [begin, end) over the whole
// batch: the sum of the gy of every window whose arg-max is e, gathered in
// ascending output order, so it gives the same bits as MaxPoolBackward
// without atomics.
KT_HOST_DEVICE inline void MaxPoolBackwardElements(const MaxPoolGeometry& g, int64_t begin,
                                                   int64_t end, const float* gy,
                                                   const int32_t* argmax, float* gx) {
  const int64_t c_n = g.channels;
  for (int64_t e = begin; e < end; ++e) {
    const int64_t b = e / g.in_image(), r = e % g.in_image();
    const int64_t ih = r / (g.in_w * c_n), iw = (r / c_n) % g.in_w, c = r % c_n;
    // Windows [o * stride, o * stride + size) that contain ih (and iw).
    const int64_t oh_lo = ih < g.size ? 0 : (ih - g.size) / g.stride + 1;
    const int64_t ow_lo = iw < g.size ? 0 : (iw - g.size) / g.stride + 1;
    const int64_t oh_hi = ih / g.stride < g.out_h - 1 ? ih / g.stride : g.out_h - 1;
    const int64_t ow_hi = iw / g.stride < g.out_w - 1 ? iw / g.stride : g.out_w - 1;
    float s = 0.0f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t o = b * g.out_image() + (oh * g.out_w + ow) * c_n + c;
        if (argmax[o] == r) s += gy[o];
      }
    }
    gx[e] = s;
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_MAX_POOL_H_
