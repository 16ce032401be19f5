// The elementwise steps of a decoder layer, fused: residual add + RMSNorm, RMSNorm, SiLU(gate) * up,
// rotary in place. PyTorch runs each as several kernels, each paying a dispatch and a pass over
// memory; a decode step has few rows, so that overhead, not arithmetic, is their cost.
//
// Each rounds where the model's PyTorch code rounds (autoglm/models/layers.py, rotary.py): a float32
// result equals PyTorch's but for the order of the RMSNorm sum of squares and SiLU's exp; a
// bfloat16 one rounds each product, sum and cast to bfloat16 as PyTorch's bfloat16 ops do.
// The bodies are compiled for AVX2 + FMA (the library's floor): plain loops the compiler vectorises,
// with contraction into FMA off, since PyTorch rounds a * b before adding c, and so must these.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=off")

namespace {

constexpr int64_t kParallelElements = 1 << 16;  // fewer than this per call: one thread (forking costs more)

inline float to_float(float v) { return v; }
inline float to_float(at::BFloat16 v) {
  uint16_t half;
  std::memcpy(&half, &v, sizeof(half));
  const uint32_t bits = static_cast<uint32_t>(half) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename T>
inline T from_float(float v);
template <>
inline float from_float<float>(float v) { return v; }
template <>
inline at::BFloat16 from_float<at::BFloat16>(float v) {  // round to nearest even, as PyTorch casts
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const uint16_t half = v != v ? uint16_t{0x7fc0} : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  at::BFloat16 out;
  std::memcpy(&out, &half, sizeof(half));
  return out;
}

// What PyTorch computes for `a op b` on two T tensors: the float result, rounded to T.
template <typename T>
inline float rounded(float v) { return to_float(from_float<T>(v)); }

// SiLU is written in AVX2 intrinsics: its exp's range clamp is a compare, which GCC will not
// vectorise in a plain loop without -fno-trapping-math. Eight lanes at a time; a row's tail goes
// through the same code in a padded buffer, so every element gets the same result wherever it is.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const at::BFloat16* p) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

// The bfloat16 bits of each float, rounded to nearest even (NaN stays NaN), in the low 16 bits of each lane.
inline __m256i bf16_bits8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded_bits = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded_bits, _mm256_set1_epi32(0x7fc0), is_nan);
}

inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void store8(at::BFloat16* p, __m256 v) {
  const __m256i bits = bf16_bits8(v);
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

template <typename T>
inline __m256 rounded8(__m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits8(v), 16));
  }
}

// exp(x) within 2 ulp: 2^n * e^r with |r| <= ln2/2 and e^r by a degree-7 polynomial; infinity above
// ln(FLT_MAX), as std::exp. x is clamped below at -86, where SiLU is already flat to float precision,
// and 2^n is built as 2^(n-1) * 2 so that it stays a normal float up to n = 128.
inline __m256 exp8(__m256 x) {
  const __m256 max_finite = _mm256_set1_ps(88.7228394f);
  const __m256 overflows = _mm256_cmp_ps(x, max_finite, _CMP_GT_OQ);
  const __m256 rounding_shift = _mm256_set1_ps(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-86.f)), max_finite);
  const __m256 shifted = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), rounding_shift);
  const __m256 n = _mm256_sub_ps(shifted, rounding_shift);
  const __m256 r = _mm256_add_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(2.12194440e-4f)));  // ln2 in two parts
  __m256 p = _mm256_set1_ps(1.f / 5040.f);
  for (const float c : {1.f / 720.f, 1.f / 120.f, 1.f / 24.f, 1.f / 6.f, 0.5f, 1.f, 1.f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i exponent = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x4B400000 - 126));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(exponent, 23))),
                                      _mm256_set1_ps(2.f));
  return _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), overflows);
}

// out = silu(gate) * up for 8 values, rounding silu to T first as PyTorch's F.silu(gate) * up does.
template <typename T>
inline void silu_and_mul8(const T* gate, const T* up, T* out) {
  const __m256 g = load8(gate);
  const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
  store8(out, _mm256_mul_ps(rounded8<T>(silu), load8(up)));
}

template <typename T>
void add_rms_norm_rows(T* x, T* residual, const T* weight, int64_t begin, int64_t end, int64_t width, float eps) {
  for (int64_t row = begin; row < end; ++row) {
    T* xr = x + row * width;
    T* rr = residual + row * width;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < width; ++i) {
      const T total = from_float<T>(to_float(rr[i]) + to_float(xr[i]));
      rr[i] = total;
      const float v = to_float(total);
      sum += v * v;
    }
    const float scale = 1.f / std::sqrt(sum / static_cast<float>(width) + eps);
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) {
      const float normalised = rounded<T>(to_float(rr[i]) * scale);
      xr[i] = from_float<T>(to_float(weight[i]) * normalised);
    }
  }
}

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
void silu_and_mul_rows(const T* gate_up, T* out, int64_t begin, int64_t end, int64_t width) {
  for (int64_t row = begin; row < end; ++row) {
    const T* gate = gate_up + row * 2 * width;
    const T* up = gate + width;
    T* outr = out + row * width;
    int64_t i = 0;
    for (; i + 8 <= width; i += 8) silu_and_mul8(gate + i, up + i, outr + i);
    if (i < width) {
      T gate_tail[8] = {}, up_tail[8] = {}, out_tail[8];
      std::copy(gate + i, gate + width, gate_tail);
      std::copy(up + i, up + width, up_tail);
      silu_and_mul8(gate_tail, up_tail, out_tail);
      std::copy(out_tail, out_tail + (width - i), outr + i);
    }
  }
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
void rotary_tokens(torch::Tensor& x, const T* cos, const T* sin, int64_t begin, int64_t end, int64_t rotary_dim,
                   bool interleaved) {
  T* data = x.data_ptr<T>();
  const int64_t heads = x.size(1), token_stride = x.stride(0), head_stride = x.stride(1);
  for (int64_t token = begin; token < end; ++token)
    for (int64_t head = 0; head < heads; ++head)
      rotate_head(data + token * token_stride + head * head_stride, cos + token * rotary_dim,
                  sin + token * rotary_dim, rotary_dim, interleaved);
}

}  // namespace

#pragma GCC pop_options

namespace {

// Rows per at::parallel_for chunk: all of them (one thread) unless the call is big enough to share.
int64_t grain_rows(int64_t rows, int64_t elements_per_row) {
  return rows * elements_per_row < kParallelElements ? rows + 1 : std::max<int64_t>(1, kParallelElements / elements_per_row);
}

// Runs body(T{}) for the tensor dtype T the checks below admit: float or at::BFloat16.
template <typename Body>
void for_dtype(torch::ScalarType dtype, Body body) {
  if (dtype == torch::kFloat32) {
    body(float{});
  } else {
    body(at::BFloat16{});
  }
}

void check_float_or_bf16(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && (t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kBFloat16),
              name, " must be a float32 or bfloat16 CPU tensor, got ", t.scalar_type(), " on ", t.device());
}

void check_norm_args(const torch::Tensor& x, const torch::Tensor& weight) {
  check_float_or_bf16(x, "x");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1) && weight.scalar_type() == x.scalar_type() &&
                  weight.is_contiguous(),
              "weight must be a contiguous 1-D tensor of x's last size and dtype");
}

}  // namespace

void fused_add_rms_norm(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps) {
  check_norm_args(x, weight);
  TORCH_CHECK(x.is_contiguous() && residual.is_contiguous() && residual.sizes() == x.sizes() &&
                  residual.scalar_type() == x.scalar_type(),
              "x and residual must be contiguous tensors of one shape and dtype");
  const int64_t width = x.size(-1), rows = x.numel() / std::max<int64_t>(width, 1);
  for_dtype(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    at::parallel_for(0, rows, grain_rows(rows, width), [&](int64_t begin, int64_t end) {
      add_rms_norm_rows(x.data_ptr<scalar_t>(), residual.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(), begin,
                        end, width, static_cast<float>(eps));
    });
  });
}

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
  check_norm_args(x, weight);
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const int64_t width = x.size(-1), rows = x.numel() / std::max<int64_t>(width, 1);
  for_dtype(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    at::parallel_for(0, rows, grain_rows(rows, width), [&](int64_t begin, int64_t end) {
      rms_norm_rows(x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), begin, end,
                    width, static_cast<float>(eps));
    });
  });
  return out;
}

torch::Tensor silu_and_mul(torch::Tensor gate_up) {
  check_float_or_bf16(gate_up, "gate_up");
  TORCH_CHECK(gate_up.size(-1) % 2 == 0, "gate_up's last size must be even (gate then up), got ", gate_up.size(-1));
  gate_up = gate_up.contiguous();
  auto sizes = gate_up.sizes().vec();
  const int64_t width = sizes.back() / 2, rows = gate_up.numel() / std::max<int64_t>(sizes.back(), 1);
  sizes.back() = width;
  auto out = torch::empty(sizes, gate_up.options());
  for_dtype(gate_up.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    at::parallel_for(0, rows, grain_rows(rows, width), [&](int64_t begin, int64_t end) {
      silu_and_mul_rows(gate_up.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), begin, end, width);
    });
  });
  return out;
}

void rotary_(torch::Tensor q, torch::Tensor k, torch::Tensor cos, torch::Tensor sin, bool interleaved) {
  check_float_or_bf16(q, "q");
  for (const auto* t : {&k, &cos, &sin})
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "q, k, cos and sin must share one dtype");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.stride(2) == 1 && k.stride(2) == 1 && k.size(0) == q.size(0) &&
                  k.size(2) == q.size(2),
              "q and k must be [tokens, heads, head_dim] with contiguous heads and one head_dim");
  TORCH_CHECK(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == q.size(0) && cos.is_contiguous() &&
                  sin.is_contiguous(),
              "cos and sin must be contiguous [tokens, rotary_dim]");
  const int64_t tokens = q.size(0), rotary_dim = cos.size(1);
  TORCH_CHECK(rotary_dim % 2 == 0 && rotary_dim <= q.size(2), "rotary_dim must be even and at most head_dim, got ",
              rotary_dim);
  const int64_t per_token = (q.size(1) + k.size(1)) * rotary_dim;
  for_dtype(q.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    at::parallel_for(0, tokens, grain_rows(tokens, per_token), [&](int64_t begin, int64_t end) {
      for (auto* x : {&q, &k})
        rotary_tokens(*x, cos.data_ptr<scalar_t>(), sin.data_ptr<scalar_t>(), begin, end, rotary_dim, interleaved);
    });
  });
}
