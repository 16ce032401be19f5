// An MLP's activation, silu(gate) * up, in one pass over [rows, 2 * inner] with gate and up side by side.
//
// It rounds where PyTorch's `F.silu(gate) * up` rounds: silu in float32 as x / (1 + e^-x), rounded to the
// model's dtype, then the product rounded again; e^x is exp_avx512.h's, so a float32 result is within a
// few roundings of PyTorch's (whose exp is another polynomial). Both the layer-by-layer forward and the
// native decode step (decode_step.cpp) call this one function, so their results are bit-identical.
#include "cpu_kernels.h"

#include <immintrin.h>

#include <cstdint>
#include <initializer_list>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")

namespace {

#include "exp_avx512.h"

inline __mmask16 lanes_below(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

inline __m512 load(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }

inline __m512 load(const uint16_t* p, __mmask16 mask) {  // a bfloat16 is the top half of a float32
  const __m256i bits = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

inline void store(float* p, __mmask16 mask, __m512 v) { _mm512_mask_storeu_ps(p, mask, v); }

// Round to nearest even on the bits, as PyTorch's conversion (a NaN becomes the quiet NaN 0x7fc0): the
// bfloat16 bits in the low half of each 32-bit lane.
inline __m512i to_bf16_bits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(rounded, is_nan, _mm512_set1_epi32(0x7fc0));
}

inline void store(uint16_t* p, __mmask16 mask, __m512 v) { _mm512_mask_cvtepi32_storeu_epi16(p, mask, to_bf16_bits(v)); }

// v as the model's dtype holds it: float32 unchanged, bfloat16 rounded and widened back.
inline __m512 held(__m512 v, float) { return v; }
inline __m512 held(__m512 v, uint16_t) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(to_bf16_bits(v), 16));
}

template <typename T>
void silu_and_mul(const T* x, T* out, int64_t rows, int64_t inner, int64_t c_begin, int64_t c_end) {
  const __m512 one = _mm512_set1_ps(1.f);
  for (int64_t r = 0; r < rows; ++r) {
    const T* gate = x + r * 2 * inner;
    const T* up = gate + inner;
    T* o = out + r * inner;
    for (int64_t c = c_begin; c < c_end; c += 16) {
      const __mmask16 mask = lanes_below(c_end - c);
      const __m512 g = load(gate + c, mask);
      const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
      store(o + c, mask, _mm512_mul_ps(held(silu, T{}), load(up + c, mask)));
    }
  }
}

}  // namespace

void kernels::silu_and_mul_columns(const float* x, float* out, int64_t rows, int64_t inner, int64_t c_begin,
                                   int64_t c_end) {
  silu_and_mul(x, out, rows, inner, c_begin, c_end);
}

void kernels::silu_and_mul_columns(const uint16_t* x, uint16_t* out, int64_t rows, int64_t inner, int64_t c_begin,
                                   int64_t c_end) {
  silu_and_mul(x, out, rows, inner, c_begin, c_end);
}

#pragma GCC pop_options
