// The bfloat16-weight linear kernel for AVX-512 (F and BW): 16 floats per register.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")

namespace avx512 {

struct Vec {
  using Reg = __m512;
  static constexpr int64_t kWidth = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load_bf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(Reg a) { return _mm512_reduce_add_ps(a); }
};

#include "bf16_weight_tiles.h"

}  // namespace avx512

#pragma GCC pop_options

void kernels::bf16_weight_linear_avx512(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N) {
  avx512::bf16_weight_linear(x, w, y, M, K, N);
}

void kernels::bf16_weight_linear_avx512_columns(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K,
                                                int64_t N, int64_t n_begin, int64_t n_end) {
  avx512::bf16_weight_columns(x, w, y, M, K, N, n_begin, n_end);
}
