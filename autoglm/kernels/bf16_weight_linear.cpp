// Small-batch linear layers on CPUs: float32 activations times bfloat16 weights, float32 sums.
//
// At decode time a linear layer reads every weight once for a handful of rows, so its speed
// is memory bandwidth. Keeping the weights in bfloat16 halves the bytes read; widening each
// bfloat16 to float32 is exact, and the sums run in float32 as a float32 matmul's do.
// Needs AVX-512 (F and BW); autoglm/kernels/cpu_extension.py checks before building it.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

// 16 bfloat16 values widened to float32: a bfloat16 is the top half of a float32.
static inline __m512 load_bf16(const uint16_t* p) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

constexpr int64_t kPrefetchAhead = 512;  // weights, in elements: keeps more DRAM reads in flight
constexpr int64_t kCols = 4;  // weight rows streamed together: independent sums hide FMA latency

// y[m0 .. m0+ROWS, n0 .. n0+COLS]: each weight vector is loaded once for all ROWS rows of x.
template <int ROWS, int COLS>
static inline void tile(const float* x, const uint16_t* w, float* y, int64_t m0, int64_t n0, int64_t K,
                        int64_t N) {
  __m512 acc[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    __m512 wv[COLS];
    for (int j = 0; j < COLS; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(w + (n0 + j) * K + k + kPrefetchAhead), _MM_HINT_T0);
      wv[j] = load_bf16(w + (n0 + j) * K + k);
    }
    for (int i = 0; i < ROWS; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + (m0 + i) * K + k);
      for (int j = 0; j < COLS; ++j) acc[i][j] = _mm512_fmadd_ps(wv[j], xv, acc[i][j]);
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) y[(m0 + i) * N + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
}

template <int COLS>
static inline void column_block(const float* x, const uint16_t* w, float* y, int64_t n0, int64_t M, int64_t K,
                                int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) tile<4, COLS>(x, w, y, m, n0, K, N);
  for (; m < M; ++m) tile<1, COLS>(x, w, y, m, n0, K, N);
}

torch::Tensor linear_bf16_weight(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kBFloat16 && w.is_contiguous(),
              "w must be a contiguous 2-D bfloat16 tensor");
  TORCH_CHECK(w.size(1) == x.size(1) && x.size(1) % 16 == 0, "in_features must match and be a multiple of 16");
  x = x.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>());
  float* yp = y.data_ptr<float>();
  const int64_t blocks = (N + kCols - 1) / kCols;
  at::parallel_for(0, blocks, 8, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t n0 = block * kCols;
      if (n0 + kCols <= N) {
        column_block<kCols>(xp, wp, yp, n0, M, K, N);
      } else {
        for (int64_t n = n0; n < N; ++n) column_block<1>(xp, wp, yp, n, M, K, N);
      }
    }
  });
  return y;
}
