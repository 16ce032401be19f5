// Small-batch linear layers on CPUs with AVX512-BF16: bfloat16 activations and weights,
// float32 sums, bfloat16 results, as a bfloat16 matmul computes them.
//
// A decode step reads every weight once for a handful of rows, so its speed is memory
// bandwidth. PyTorch's one-row bfloat16 `linear` streams weights well below it on these CPUs;
// here each weight cache line (32 bfloat16 values) feeds one `vdpbf16ps` per row of x, which
// multiplies pairs of bfloat16 exactly and adds them into 16 float32 sums. The weight rows are
// read in order, which the hardware prefetcher follows: software prefetches measured slower.
// Compiled for AVX512-BF16 (the pragma below); autoglm/kernels/linear_kernels.py calls it only
// on CPUs that report the flags.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")

namespace {

// Weight rows multiplied together once x has kMinRowsForBlocks rows: each weight vector then feeds 4 x 4 sums,
// enough arithmetic per byte for prompts. Below it one weight row at a time: a thread then reads its
// share of the weights front to back, a single stream the hardware prefetcher follows at full speed
// (interleaving 4 rows' streams read at about half the rate at batch 1 on a 2-core AMD EPYC). Every (row, column) sum is the same chain of `vdpbf16ps` either way.
constexpr int64_t kCols = 4;
constexpr int64_t kMinRowsForBlocks = 16;

inline __m512bh load32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

// y[m0 .. m0+ROWS, n0 .. n0+COLS]: each weight vector is loaded once for all ROWS rows of x.
template <int ROWS, int COLS>
inline void tile(const uint16_t* x, const uint16_t* w, const float* bias, c10::BFloat16* y, int64_t m0, int64_t n0,
                 int64_t K, int64_t N) {
  __m512 acc[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    __m512bh wv[COLS];
    for (int j = 0; j < COLS; ++j) {
      wv[j] = load32(w + (n0 + j) * K + k);
    }
    for (int i = 0; i < ROWS; ++i) {
      const __m512bh xv = load32(x + (m0 + i) * K + k);
      for (int j = 0; j < COLS; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) {
      const float sum = _mm512_reduce_add_ps(acc[i][j]) + (bias ? bias[n0 + j] : 0.f);
      y[(m0 + i) * N + n0 + j] = c10::BFloat16(sum);  // rounds to nearest even
    }
}

template <int COLS>
inline void column_block(const uint16_t* x, const uint16_t* w, const float* bias, c10::BFloat16* y, int64_t n0,
                         int64_t M, int64_t K, int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) tile<4, COLS>(x, w, bias, y, m, n0, K, N);
  for (; m < M; ++m) tile<1, COLS>(x, w, bias, y, m, n0, K, N);
}

// Columns [n_begin, n_end): kCols at a time for many rows, then one by one; a column's sums do not depend on which.
void columns(const uint16_t* x, const uint16_t* w, const float* bias, c10::BFloat16* y, int64_t M, int64_t K,
             int64_t N, int64_t n_begin, int64_t n_end) {
  int64_t n = n_begin;
  if (M >= kMinRowsForBlocks) {
    for (; n + kCols <= n_end; n += kCols) column_block<kCols>(x, w, bias, y, n, M, K, N);
  }
  for (; n < n_end; ++n) column_block<1>(x, w, bias, y, n, M, K, N);
}

void run(const uint16_t* x, const uint16_t* w, const float* bias, c10::BFloat16* y, int64_t M, int64_t K, int64_t N) {
  const int64_t blocks = (N + kCols - 1) / kCols;
  at::parallel_for(0, blocks, 8, [&](int64_t begin, int64_t end) {
    columns(x, w, bias, y, M, K, N, begin * kCols, std::min(end * kCols, N));
  });
}

}  // namespace

#pragma GCC pop_options

void kernels::bf16_dot_linear(const uint16_t* x, const uint16_t* w, const float* bias, uint16_t* y, int64_t M,
                              int64_t K, int64_t N) {
  run(x, w, bias, reinterpret_cast<c10::BFloat16*>(y), M, K, N);
}

void kernels::bf16_dot_linear_columns(const uint16_t* x, const uint16_t* w, const float* bias, uint16_t* y, int64_t M,
                                      int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  columns(x, w, bias, reinterpret_cast<c10::BFloat16*>(y), M, K, N, n_begin, n_end);
}
