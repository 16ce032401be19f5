// The elementwise steps of a decoder layer, fused: residual add + RMSNorm, RMSNorm, rotary in place.
// PyTorch runs each as several kernels, each paying a dispatch and a pass over memory; a decode
// step has few rows, so that overhead, not arithmetic, is their cost.
//
// Each rounds where the model's PyTorch code rounds (autoglm/models/layers.py, rotary.py): a float32
// result equals PyTorch's but for the order of the RMSNorm sum of squares; a bfloat16 one rounds
// each product, sum and cast to bfloat16 as PyTorch's bfloat16 ops do.
// The bodies are compiled for AVX2 + FMA (the library's floor): plain loops the compiler vectorises,
// with contraction into FMA off, since PyTorch rounds a * b before adding c, and so must these.
// (SiLU-and-mul is silu_and_mul.cpp, AVX-512: an AVX2 version lost to PyTorch's AVX-512 exp at 32 rows.)
#include "cpu_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=off")

namespace {

constexpr int64_t kParallelElements = 1 << 16;  // fewer than this per call: one thread (forking costs more)

// bfloat16 values are handled as their bits, uint16_t (bf16_bits.h).
#include "bf16_bits.h"

inline float to_float(float v) { return v; }
inline float to_float(uint16_t half) { return bf16_bits_to_float(half); }

template <typename T>
inline T from_float(float v);
template <>
inline float from_float<float>(float v) { return v; }
template <>
inline uint16_t from_float<uint16_t>(float v) { return float_to_bf16_bits(v); }

// What PyTorch computes for `a op b` on two T tensors: the float result, rounded to T.
template <typename T>
inline float rounded(float v) { return to_float(from_float<T>(v)); }

template <typename T>
void rms_norm_rows(const T* x, const T* weight, T* out, int64_t begin, int64_t end, int64_t width, float eps) {
  for (int64_t row = begin; row < end; ++row) {
    const T* xr = x + row * width;
    T* outr = out + row * width;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < width; ++i) {
      const float v = to_float(xr[i]);
      sum += v * v;
    }
    const float scale = 1.f / std::sqrt(sum / static_cast<float>(width) + eps);
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) {
      const float normalised = rounded<T>(to_float(xr[i]) * scale);
      outr[i] = from_float<T>(to_float(weight[i]) * normalised);
    }
  }
}

template <typename T>
void add_rms_norm_rows(T* x, T* residual, const T* weight, int64_t begin, int64_t end, int64_t width, float eps) {
  for (int64_t row = begin; row < end; ++row) {
    T* xr = x + row * width;
    T* rr = residual + row * width;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) rr[i] = from_float<T>(to_float(rr[i]) + to_float(xr[i]));
  }
  rms_norm_rows(residual, weight, x, begin, end, width, eps);
}

// One head [head_dim] of one token, rotated in place over its first rotary_dim values: each value x_i
// becomes x_i cos_i + t_i sin_i, t_i its partner in the rotation, negated for the first of the two.
// (Written as one sum for every value, not a - b and c + d: GCC 12 fuses an alternating
// subtract/add into vfmaddsub even with contraction off, which would round once instead of twice.)
template <typename T>
inline void rotate_head(T* x, const T* cos, const T* sin, int64_t rotary_dim, bool interleaved) {
  if (interleaved) {  // pairs (2i, 2i+1)
#pragma omp simd
    for (int64_t i = 0; i < rotary_dim; i += 2) {
      const float x0 = to_float(x[i]), x1 = to_float(x[i + 1]);
      const float turned0 = -x1, turned1 = x0;
      x[i] = from_float<T>(rounded<T>(x0 * to_float(cos[i])) + rounded<T>(turned0 * to_float(sin[i])));
      x[i + 1] = from_float<T>(rounded<T>(x1 * to_float(cos[i + 1])) + rounded<T>(turned1 * to_float(sin[i + 1])));
    }
  } else {  // the first half against the second
    const int64_t half = rotary_dim / 2;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = to_float(x[i]), x1 = to_float(x[i + half]);
      const float turned0 = -x1, turned1 = x0;
      x[i] = from_float<T>(rounded<T>(x0 * to_float(cos[i])) + rounded<T>(turned0 * to_float(sin[i])));
      x[i + half] = from_float<T>(rounded<T>(x1 * to_float(cos[i + half])) +
                                  rounded<T>(turned1 * to_float(sin[i + half])));
    }
  }
}

template <typename T>
void rotary_tokens(const kernels::RotaryHeads<T>& x, const T* cos, const T* sin, int64_t begin, int64_t end,
                   int64_t rotary_dim, bool interleaved) {
  for (int64_t token = begin; token < end; ++token)
    for (int64_t head = 0; head < x.heads; ++head)
      rotate_head(x.values + token * x.token_stride + head * x.head_stride, cos + token * rotary_dim,
                  sin + token * rotary_dim, rotary_dim, interleaved);
}

}  // namespace

#pragma GCC pop_options

namespace {

// Rows per at::parallel_for chunk: all of them (one thread) unless the call is big enough to share.
int64_t grain_rows(int64_t rows, int64_t elements_per_row) {
  return rows * elements_per_row < kParallelElements ? rows + 1 : std::max<int64_t>(1, kParallelElements / elements_per_row);
}

template <typename T>
void fused_add_rms_norm_all(T* x, T* residual, const T* weight, int64_t rows, int64_t width, float eps) {
  at::parallel_for(0, rows, grain_rows(rows, width), [&](int64_t begin, int64_t end) {
    add_rms_norm_rows(x, residual, weight, begin, end, width, eps);
  });
}

template <typename T>
void rms_norm_all(const T* x, const T* weight, T* out, int64_t rows, int64_t width, float eps) {
  at::parallel_for(0, rows, grain_rows(rows, width), [&](int64_t begin, int64_t end) {
    rms_norm_rows(x, weight, out, begin, end, width, eps);
  });
}

template <typename T>
void rotary_all(const kernels::RotaryHeads<T>& q, const kernels::RotaryHeads<T>& k, const T* cos, const T* sin,
                int64_t tokens, int64_t rotary_dim, bool interleaved) {
  const int64_t per_token = (q.heads + k.heads) * rotary_dim;
  at::parallel_for(0, tokens, grain_rows(tokens, per_token), [&](int64_t begin, int64_t end) {
    for (const auto* x : {&q, &k}) rotary_tokens(*x, cos, sin, begin, end, rotary_dim, interleaved);
  });
}

}  // namespace

void kernels::fused_add_rms_norm(float* x, float* residual, const float* weight, int64_t rows, int64_t width,
                                 float eps) {
  fused_add_rms_norm_all(x, residual, weight, rows, width, eps);
}

void kernels::fused_add_rms_norm(uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t rows,
                                 int64_t width, float eps) {
  fused_add_rms_norm_all(x, residual, weight, rows, width, eps);
}

void kernels::rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t width, float eps) {
  rms_norm_all(x, weight, out, rows, width, eps);
}

void kernels::rms_norm(const uint16_t* x, const uint16_t* weight, uint16_t* out, int64_t rows, int64_t width,
                       float eps) {
  rms_norm_all(x, weight, out, rows, width, eps);
}

void kernels::fused_add_rms_norm_rows(float* x, float* residual, const float* weight, int64_t begin, int64_t end,
                                      int64_t width, float eps) {
  add_rms_norm_rows(x, residual, weight, begin, end, width, eps);
}

void kernels::fused_add_rms_norm_rows(uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t begin,
                                      int64_t end, int64_t width, float eps) {
  add_rms_norm_rows(x, residual, weight, begin, end, width, eps);
}

void kernels::rms_norm_rows(const float* x, const float* weight, float* out, int64_t begin, int64_t end,
                            int64_t width, float eps) {
  ::rms_norm_rows(x, weight, out, begin, end, width, eps);
}

void kernels::rms_norm_rows(const uint16_t* x, const uint16_t* weight, uint16_t* out, int64_t begin, int64_t end,
                            int64_t width, float eps) {
  ::rms_norm_rows(x, weight, out, begin, end, width, eps);
}

void kernels::rotary_rows(RotaryHeads<float> x, const float* cos, const float* sin, int64_t begin, int64_t end,
                          int64_t rotary_dim, bool interleaved) {
  rotary_tokens(x, cos, sin, begin, end, rotary_dim, interleaved);
}

void kernels::rotary_rows(RotaryHeads<uint16_t> x, const uint16_t* cos, const uint16_t* sin, int64_t begin,
                          int64_t end, int64_t rotary_dim, bool interleaved) {
  rotary_tokens(x, cos, sin, begin, end, rotary_dim, interleaved);
}

void kernels::rotary(RotaryHeads<float> q, RotaryHeads<float> k, const float* cos, const float* sin, int64_t tokens,
                     int64_t rotary_dim, bool interleaved) {
  rotary_all(q, k, cos, sin, tokens, rotary_dim, interleaved);
}

void kernels::rotary(RotaryHeads<uint16_t> q, RotaryHeads<uint16_t> k, const uint16_t* cos, const uint16_t* sin,
                     int64_t tokens, int64_t rotary_dim, bool interleaved) {
  rotary_all(q, k, cos, sin, tokens, rotary_dim, interleaved);
}
