#include "runtime/nn/direct_conv.h"

#include <cstring>

// Compiled for AVX-512 and AVX2+FMA as well as the baseline; the loader picks
// the best the CPU has (GCC function multi-versioning).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KT_CPU_CLONES
#endif

namespace kubetrain::nn {
namespace {

// acc[f] += v * w[f] for f < n.
inline void Axpy(int64_t n, float v, const float* __restrict w, float* __restrict acc) {
  for (int64_t f = 0; f < n; ++f) acc[f] += v * w[f];
}

}  // namespace

KT_CPU_CLONES void DirectConvForward(const ConvGeometry& g, int64_t begin, int64_t end,
                                     const float* x, const float* wt, const float* bias, float* y) {
  const int64_t f_n = g.filters, k = g.kernel;
  for (int64_t b = begin; b < end; ++b) {
    const float* img = x + b * g.in_h * g.in_w * g.in_c;
    float* yb = y + b * g.out_h * g.out_w * f_n;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        float* __restrict acc = yb + (oh * g.out_w + ow) * f_n;
        std::memcpy(acc, bias, static_cast<size_t>(f_n) * sizeof(float));
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * g.stride - g.pad + kh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < k; ++kw) {
            const int64_t iw = ow * g.stride - g.pad + kw;
            if (iw < 0 || iw >= g.in_w) continue;
            const float* xi = img + (ih * g.in_w + iw) * g.in_c;
            const float* wk = wt + (kh * k + kw) * g.in_c * f_n;
            for (int64_t c = 0; c < g.in_c; ++c) Axpy(f_n, xi[c], wk + c * f_n, acc);
          }
        }
      }
    }
  }
}

KT_CPU_CLONES void DirectConvParamGrad(const ConvGeometry& g, int64_t begin, int64_t end,
                                       const float* x, const float* gy, float* dwt, float* db) {
  const int64_t f_n = g.filters, k = g.kernel;
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
            for (int64_t c = 0; c < g.in_c; ++c) Axpy(f_n, xi[c], go, dk + c * f_n);
          }
        }
      }
    }
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
