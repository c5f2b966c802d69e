#include "runtime/nn/direct_conv.h"

#include <cstring>
#include <vector>

#include "runtime/tensor/kernels/cpu_clones.h"

namespace kubetrain::nn {
namespace {

// The filter count as a compile-time constant where it is a common one, so
// that the filter loops become whole vector registers; 0 means "read it from
// the geometry".
template <int64_t kF>
__attribute__((always_inline)) inline int64_t Filters(const ConvGeometry& g) {
  return kF > 0 ? kF : g.filters;
}

// Adds the window around output pixel (oh, ow) of one image into acc.
template <int64_t kF>
__attribute__((always_inline)) inline void Window(const ConvGeometry& g, const float* img,
                                                  const float* wt, int64_t oh, int64_t ow,
                                                  float* __restrict acc) {
  const int64_t f_n = Filters<kF>(g), k = g.kernel;
  for (int64_t kh = 0; kh < k; ++kh) {
    const int64_t ih = oh * g.stride - g.pad + kh;
    if (ih < 0 || ih >= g.in_h) continue;
    for (int64_t kw = 0; kw < k; ++kw) {
      const int64_t iw = ow * g.stride - g.pad + kw;
      if (iw < 0 || iw >= g.in_w) continue;
      const float* xi = img + (ih * g.in_w + iw) * g.in_c;
      const float* wk = wt + (kh * k + kw) * g.in_c * f_n;
      for (int64_t c = 0; c < g.in_c; ++c) {
        const float v = xi[c];
        const float* __restrict w = wk + c * f_n;
        for (int64_t f = 0; f < f_n; ++f) acc[f] += v * w[f];
      }
    }
  }
}

template <int64_t kF>
__attribute__((always_inline)) inline void Forward(const ConvGeometry& g, int64_t begin,
                                                   int64_t end, const float* x, const float* wt,
                                                   const float* bias, float* y) {
  const int64_t f_n = Filters<kF>(g);
  for (int64_t b = begin; b < end; ++b) {
    const float* img = x + b * g.in_h * g.in_w * g.in_c;
    float* yb = y + b * g.out_h * g.out_w * f_n;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* __restrict yo = yb + (oh * g.out_w + ow) * f_n;
        if constexpr (kF > 0) {
          // In registers: the filter count is known.
          float acc[kF];
          for (int64_t f = 0; f < kF; ++f) acc[f] = bias[f];
          Window<kF>(g, img, wt, oh, ow, acc);
          for (int64_t f = 0; f < kF; ++f) yo[f] = acc[f];
        } else {
          for (int64_t f = 0; f < f_n; ++f) yo[f] = bias[f];
          Window<kF>(g, img, wt, oh, ow, yo);
        }
      }
    }
  }
}

template <int64_t kF>
__attribute__((always_inline)) inline void ParamGrad(const ConvGeometry& g, int64_t begin,
                                                     int64_t end, const float* x, const float* gy,
                                                     float* dwt, float* db) {
  const int64_t f_n = Filters<kF>(g), k = g.kernel;
  for (int64_t b = begin; b < end; ++b) {
    const float* img = x + b * g.in_h * g.in_w * g.in_c;
    const float* gyb = gy + b * g.out_h * g.out_w * f_n;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const float* __restrict go = gyb + (oh * g.out_w + ow) * f_n;
        for (int64_t f = 0; f < f_n; ++f) db[f] += go[f];
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * g.stride - g.pad + kh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < k; ++kw) {
            const int64_t iw = ow * g.stride - g.pad + kw;
            if (iw < 0 || iw >= g.in_w) continue;
            const float* xi = img + (ih * g.in_w + iw) * g.in_c;
            float* dk = dwt + (kh * k + kw) * g.in_c * f_n;
            for (int64_t c = 0; c < g.in_c; ++c) {
              const float v = xi[c];
              float* __restrict d = dk + c * f_n;
              for (int64_t f = 0; f < f_n; ++f) d[f] += v * go[f];
            }
          }
        }
      }
    }
  }
}

// One input channel, stride 1, a kKxkK kernel and kF filters, all known at
// compile time: each image is first copied into a zero-padded one, so the
// taps need no bounds checks and the loops unroll into register FMAs.
// `padded` holds (in_h + 2 pad) x (in_w + 2 pad) floats.
template <int64_t kF, int64_t kK>
__attribute__((always_inline)) inline const float* PadImage(const ConvGeometry& g, const float* img,
                                                            float* padded) {
  const int64_t pw = g.in_w + 2 * g.pad, ph = g.in_h + 2 * g.pad;
  for (int64_t i = 0; i < pw * ph; ++i) padded[i] = 0.0f;
  for (int64_t h = 0; h < g.in_h; ++h) {
    for (int64_t w = 0; w < g.in_w; ++w) padded[(h + g.pad) * pw + w + g.pad] = img[h * g.in_w + w];
  }
  return padded;
}

template <int64_t kF, int64_t kK>
__attribute__((always_inline)) inline void ForwardThin(const ConvGeometry& g, int64_t begin,
                                                       int64_t end, const float* x, const float* wt,
                                                       const float* bias, float* y, float* padded) {
  const int64_t pw = g.in_w + 2 * g.pad;
  for (int64_t b = begin; b < end; ++b) {
    const float* xp = PadImage<kF, kK>(g, x + b * g.in_h * g.in_w, padded);
    float* yb = y + b * g.out_h * g.out_w * kF;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      // Two pixels at a time: twice the independent FMA chains.
      int64_t ow = 0;
      for (; ow + 2 <= g.out_w; ow += 2) {
        float acc0[kF], acc1[kF];
        for (int64_t f = 0; f < kF; ++f) acc0[f] = acc1[f] = bias[f];
          // Fully unrolled, so that the sums stay in registers.
#pragma GCC unroll 8
        for (int64_t kh = 0; kh < kK; ++kh) {
#pragma GCC unroll 8
          for (int64_t kw = 0; kw < kK; ++kw) {
            const float* xr = xp + (oh + kh) * pw + ow + kw;
            const float v0 = xr[0], v1 = xr[1];
            const float* w = wt + (kh * kK + kw) * kF;
            for (int64_t f = 0; f < kF; ++f) {
              acc0[f] += v0 * w[f];
              acc1[f] += v1 * w[f];
            }
          }
        }
        float* yo = yb + (oh * g.out_w + ow) * kF;
        for (int64_t f = 0; f < kF; ++f) {
          yo[f] = acc0[f];
          yo[kF + f] = acc1[f];
        }
      }
      for (; ow < g.out_w; ++ow) {
        float acc[kF];
        for (int64_t f = 0; f < kF; ++f) acc[f] = bias[f];
        for (int64_t kh = 0; kh < kK; ++kh) {
          for (int64_t kw = 0; kw < kK; ++kw) {
            const float v = xp[(oh + kh) * pw + ow + kw];
            const float* w = wt + (kh * kK + kw) * kF;
            for (int64_t f = 0; f < kF; ++f) acc[f] += v * w[f];
          }
        }
        float* yo = yb + (oh * g.out_w + ow) * kF;
        for (int64_t f = 0; f < kF; ++f) yo[f] = acc[f];
      }
    }
  }
}

template <int64_t kF, int64_t kK>
__attribute__((always_inline)) inline void ParamGradThin(const ConvGeometry& g, int64_t begin,
                                                         int64_t end, const float* x,
                                                         const float* gy, float* dwt, float* db,
                                                         float* padded) {
  const int64_t pw = g.in_w + 2 * g.pad;
  for (int64_t b = begin; b < end; ++b) {
    const float* xp = PadImage<kF, kK>(g, x + b * g.in_h * g.in_w, padded);
    const float* gyb = gy + b * g.out_h * g.out_w * kF;
    // One tap at a time, its kF sums in registers, over the whole image.
    for (int64_t tap = 0; tap < kK * kK; ++tap) {
      const int64_t kh = tap / kK, kw = tap % kK;
      float acc[kF];
      for (int64_t f = 0; f < kF; ++f) acc[f] = 0.0f;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const float* xr = xp + (oh + kh) * pw + kw;
        const float* gr = gyb + oh * g.out_w * kF;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const float v = xr[ow];
          for (int64_t f = 0; f < kF; ++f) acc[f] += v * gr[ow * kF + f];
        }
      }
      float* d = dwt + tap * kF;
      for (int64_t f = 0; f < kF; ++f) d[f] += acc[f];
    }
    float acc[kF];
    for (int64_t f = 0; f < kF; ++f) acc[f] = 0.0f;
    for (int64_t p = 0; p < g.out_h * g.out_w; ++p) {
      for (int64_t f = 0; f < kF; ++f) acc[f] += gyb[p * kF + f];
    }
    for (int64_t f = 0; f < kF; ++f) db[f] += acc[f];
  }
}

bool IsThin3x3(const ConvGeometry& g) {
  return g.in_c == 1 && g.stride == 1 && g.kernel == 3 &&
         (g.filters == 16 || g.filters == 32 || g.filters == 64) &&
         g.out_h == g.in_h + 2 * g.pad - 2 && g.out_w == g.in_w + 2 * g.pad - 2;
}

}  // namespace

KT_CPU_CLONES void DirectConvForward(const ConvGeometry& g, int64_t begin, int64_t end,
                                     const float* x, const float* wt, const float* bias, float* y) {
  if (IsThin3x3(g)) {
    std::vector<float> padded(static_cast<size_t>((g.in_h + 2 * g.pad) * (g.in_w + 2 * g.pad)));
    float* p = padded.data();
    if (g.filters == 16) return ForwardThin<16, 3>(g, begin, end, x, wt, bias, y, p);
    if (g.filters == 32) return ForwardThin<32, 3>(g, begin, end, x, wt, bias, y, p);
    return ForwardThin<64, 3>(g, begin, end, x, wt, bias, y, p);
  }
  switch (g.filters) {
    case 16:
      return Forward<16>(g, begin, end, x, wt, bias, y);
    case 32:
      return Forward<32>(g, begin, end, x, wt, bias, y);
    case 64:
      return Forward<64>(g, begin, end, x, wt, bias, y);
    default:
      return Forward<0>(g, begin, end, x, wt, bias, y);
  }
}

KT_CPU_CLONES void DirectConvParamGrad(const ConvGeometry& g, int64_t begin, int64_t end,
                                       const float* x, const float* gy, float* dwt, float* db) {
  if (IsThin3x3(g)) {
    std::vector<float> padded(static_cast<size_t>((g.in_h + 2 * g.pad) * (g.in_w + 2 * g.pad)));
    float* p = padded.data();
    if (g.filters == 16) return ParamGradThin<16, 3>(g, begin, end, x, gy, dwt, db, p);
    if (g.filters == 32) return ParamGradThin<32, 3>(g, begin, end, x, gy, dwt, db, p);
    return ParamGradThin<64, 3>(g, begin, end, x, gy, dwt, db, p);
  }
  switch (g.filters) {
    case 16:
      return ParamGrad<16>(g, begin, end, x, gy, dwt, db);
    case 32:
      return ParamGrad<32>(g, begin, end, x, gy, dwt, db);
    case 64:
      return ParamGrad<64>(g, begin, end, x, gy, dwt, db);
    default:
      return ParamGrad<0>(g, begin, end, x, gy, dwt, db);
  }
}
KT_CPU_CLONES void DirectConvInputGrad(const ConvGeometry& g, int64_t begin, int64_t end,
                                       const float* gy, const float* wt, float* gx) {
  const int64_t f_n = g.filters, k = g.kernel;
  const int64_t image = g.in_h * g.in_w * g.in_c;
  for (int64_t b = begin; b < end; ++b) {
    float* img = gx + b * image;
    std::memset(img, 0, static_cast<size_t>(image) * sizeof(float));
    const float* gyb = gy + b * g.out_h * g.out_w * f_n;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const float* go = gyb + (oh * g.out_w + ow) * f_n;
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * g.stride - g.pad + kh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < k; ++kw) {
            const int64_t iw = ow * g.stride - g.pad + kw;
            if (iw < 0 || iw >= g.in_w) continue;
            float* xi = img + (ih * g.in_w + iw) * g.in_c;
            const float* wk = wt + (kh * k + kw) * g.in_c * f_n;
            for (int64_t c = 0; c < g.in_c; ++c) {
              float s = 0.0f;
              for (int64_t f = 0; f < f_n; ++f) s += go[f] * wk[c * f_n + f];
              xi[c] += s;
            }
          }
        }
      }
    }
  }
}

}  // namespace kubetrain::nn
