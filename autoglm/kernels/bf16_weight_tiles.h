// The tiles of the bfloat16-weight linear kernel, written once for every vector width.
//
// Each bf16_weight_linear_<isa>.cpp includes this inside its own namespace, after its target
// pragma and after defining `Vec`: the register type `Reg`, its width `kWidth` in floats, and
// `zero`, `load` (floats), `load_bf16` (bfloat16 widened to float32: exact, a bfloat16 is the top
// half of a float32), `fmadd` and `sum`. No #include here: the including file has them all.

constexpr int64_t kPrefetchAhead = 512;  // weights, in elements: keeps more DRAM reads in flight for 4 rows at once
constexpr int64_t kCols = 4;  // weight rows multiplied together for many rows of x: 4 x 4 sums per weight load
// Below this many rows of x, one weight row at a time: each thread reads its share of the weights front to
// back, one stream for the hardware prefetcher (see bf16_dot_linear.cpp). The sums are the same either way.
constexpr int64_t kMinRowsForBlocks = 16;

// y[m0 .. m0+ROWS, n0 .. n0+COLS]: each weight vector is loaded once for all ROWS rows of x.
template <int ROWS, int COLS>
inline void tile(const float* x, const uint16_t* w, float* y, int64_t m0, int64_t n0, int64_t K, int64_t N) {
  typename Vec::Reg acc[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) acc[i][j] = Vec::zero();
  for (int64_t k = 0; k < K; k += Vec::kWidth) {
    typename Vec::Reg wv[COLS];
    for (int j = 0; j < COLS; ++j) {
      if (COLS > 1) _mm_prefetch(reinterpret_cast<const char*>(w + (n0 + j) * K + k + kPrefetchAhead), _MM_HINT_T0);
      wv[j] = Vec::load_bf16(w + (n0 + j) * K + k);
    }
    for (int i = 0; i < ROWS; ++i) {
      const typename Vec::Reg xv = Vec::load(x + (m0 + i) * K + k);
      for (int j = 0; j < COLS; ++j) acc[i][j] = Vec::fmadd(wv[j], xv, acc[i][j]);
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) y[(m0 + i) * N + n0 + j] = Vec::sum(acc[i][j]);
}

template <int COLS>
inline void column_block(const float* x, const uint16_t* w, float* y, int64_t n0, int64_t M, int64_t K, int64_t N) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) tile<4, COLS>(x, w, y, m, n0, K, N);
  for (; m < M; ++m) tile<1, COLS>(x, w, y, m, n0, K, N);
}

// Columns [n_begin, n_end) of y [M, N] = x [M, K] @ w [N, K]^T, on the calling thread; K a multiple of
// Vec::kWidth. kCols columns at a time, then one by one: a column's sums do not depend on which.
inline void bf16_weight_columns(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N,
                                int64_t n_begin, int64_t n_end) {
  int64_t n = n_begin;
  if (M >= kMinRowsForBlocks) {
    for (; n + kCols <= n_end; n += kCols) column_block<kCols>(x, w, y, n, M, K, N);
  }
  for (; n < n_end; ++n) column_block<1>(x, w, y, n, M, K, N);
}

// y [M, N] = x [M, K] @ w [N, K]^T over the thread pool.
inline void bf16_weight_linear(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N) {
  const int64_t blocks = (N + kCols - 1) / kCols;
  at::parallel_for(0, blocks, 8, [&](int64_t begin, int64_t end) {
    bf16_weight_columns(x, w, y, M, K, N, begin * kCols, std::min(end * kCols, N));
  });
}
