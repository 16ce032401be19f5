// The bfloat16-weight linear kernel for AVX2 with FMA, the portable x86 path: 8 floats per register.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace avx2 {

struct Vec {
  using Reg = __m256;
  static constexpr int64_t kWidth = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load_bf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(Reg a) {
    const __m128 half = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
  }
};

#include "bf16_weight_tiles.h"

}  // namespace avx2

#pragma GCC pop_options

void kernels::bf16_weight_linear_avx2(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N) {
  avx2::bf16_weight_linear(x, w, y, M, K, N);
}
