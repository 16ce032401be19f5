// int8 or int4 weights times int8 activations (W8A8, W4A8) on CPUs with AVX512-VNNI.
//
// A decode step reads every weight once, so its speed is the bytes per weight over the memory
// bandwidth. `vpdpbusd` multiplies 64 unsigned bytes by 64 signed bytes into 16 int32 sums in one
// instruction, so an int8 weight cache line (or 128 int4 weights) costs one instruction per row of
// activations, and the weights stream at bandwidth.
//
// Layout (autoglm/models/linear_method/int_activation_weights.py packs it). Each column's bytes:
//   int8  in_features bytes, each q + 128 (unsigned: vpdpbusd's unsigned side)
//   int4  in_features / 2 bytes, each 128 columns as 64 bytes, byte j holding q[j] + 8 in its low nibble
//         and q[j + 64] + 8 in its high one (a last 64 columns: 32 bytes, q[j] and q[j + 32])
// cut into units of 64 bytes (the int4 tail: 32), and the units of 4 neighbouring columns interleaved,
// unit by unit, so that a tile of 4 columns reads one sequential stream: 4 streams a few hundred bytes
// apart measured a third of the bandwidth one stream gets. Columns are padded to a multiple of 4.
//   scales [out, in / group] bfloat16 bits, row-major
// The offset (128, 8) times the sum of a group's activations is taken off in int32 before the sum
// leaves the group, so each group's integer dot product is exact: the activation side keeps minus
// those sums, and each block's sum starts from them.
//
// A "block" is the span of columns one scale vector covers: a group, or for groups of 32 a 64-column
// chunk whose lanes 0-7 belong to one group and 8-15 to the next. Within a block, int32; across
// blocks, float32 in 16 lanes, reduced in one fixed order at the end: each output element is
// computed the same way whatever the rows and columns asked together.
#include "cpu_kernels.h"

#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")

namespace {

constexpr int64_t kChunk = 64;      // activations (and weights) per vpdpbusd
constexpr int64_t kAlign = 64;
constexpr int64_t kRowBlock = 32;   // rows whose activations stay in cache while a column block passes
// Rows multiplied by each weight vector loaded: 4, or 2 for groups of 32, whose per-chunk float sums would
// not fit the registers beside 4 rows' integer ones.
constexpr int kRowTile = 4, kPairsRowTile = 2;
constexpr int64_t kColTile = 4;     // weight columns interleaved in the layout, streamed together

int64_t block_width(int64_t group) { return group == 32 ? kChunk : group; }
int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

inline __m512 widen(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 widen(const uint16_t* x) {
  const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

// One row: scale = max|x| / 127, q = round(x / scale) (to nearest even, as torch.round), and minus
// the sums of q per group, placed in the lanes whose products belong to that group.
template <typename T>
void quantize_row(const T* x, int8_t* q, float* scale, int32_t* neg_sums, int64_t cols, int64_t group) {
  __m512 absmax = _mm512_setzero_ps();
  for (int64_t k = 0; k < cols; k += 16) absmax = _mm512_max_ps(absmax, _mm512_abs_ps(widen(x + k)));
  const float row_scale = _mm512_reduce_max_ps(absmax) / 127.f;
  *scale = row_scale;
  const __m512 divisor = _mm512_set1_ps(row_scale > 0.f ? row_scale : 1.f);
  const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127);
  const int64_t width = block_width(group);
  std::memset(neg_sums, 0, sizeof(int32_t) * 16 * (cols / width));
  for (int64_t k = 0; k < cols; k += 32) {
    int32_t sum = 0;
    for (int64_t half = k; half < k + 32; half += 16) {
      __m512i v = _mm512_cvtps_epi32(_mm512_div_ps(widen(x + half), divisor));
      v = _mm512_min_epi32(_mm512_max_epi32(v, low), high);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + half), _mm512_cvtepi32_epi8(v));
      sum += _mm512_reduce_add_epi32(v);
    }
    const int64_t lane = group == 32 && k % kChunk ? 8 : 0;
    neg_sums[16 * (k / width) + lane] -= sum;
  }
}

template <typename T>
void quantize_all(const T* x, kernels::Int8Rows& out) {
  for (int64_t m = 0; m < out.rows; ++m) {
    quantize_row(x + m * out.cols, out.q + m * out.cols, out.scale + m, out.neg_sums + m * out.blocks * 16, out.cols,
                 out.group);
  }
}

// Where column n's bytes begin in the layout: its tile of kColTile, and its place in each unit.
struct Column {
  const uint8_t* tile;
  int64_t lane;
};

// The 64 weights of a column for activations [64 * chunk, 64 * chunk + 64), as unsigned bytes.
template <int BITS>
inline __m512i weight_chunk(Column c, int64_t chunk, int64_t cols) {
  constexpr int64_t unit = 64, stride = unit * kColTile;
  if constexpr (BITS == 8) {
    return _mm512_loadu_si512(c.tile + chunk * stride + c.lane * unit);
  } else {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    const int64_t pair = chunk / 2;
    if ((pair + 1) * 2 * kChunk <= cols) {
      const __m512i v = _mm512_loadu_si512(c.tile + pair * stride + c.lane * unit);
      return chunk % 2 ? _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble) : _mm512_and_si512(v, nibble);
    }
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.tile + pair * stride + c.lane * unit / 2));
    const __m256i nibble256 = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(v, nibble256), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble256);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
}

// Block b's scales of column n as float32 lanes: for groups of 32, lanes 0-7 group 2b and 8-15 group 2b + 1.
inline __m512 scale_lanes(const uint16_t* scales, int64_t b, bool pairs) {
  if (pairs) {
    int32_t two;
    std::memcpy(&two, scales + 2 * b, sizeof(two));
    // bfloat16 bits into the high half of each 32-bit lane: odd 16-bit lanes take scale 0 (lanes 0-7) or 1.
    const __m512i index = _mm512_set_epi16(1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
                                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, index, _mm512_castsi128_si512(_mm_cvtsi32_si128(two))));
  }
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(scales[b]) << 16)));
}

// acc += the 4-byte dot products of unsigned u and signed s, lane by lane. In place: the intrinsic's
// three-operand form made GCC copy every accumulator twice per instruction in the tiles below.
inline void dot_add(__m512i& acc, __m512i u, const int8_t* s) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const __m512i*>(s)));
}

inline void store(float* y, float value) { *y = value; }
inline void store(uint16_t* y, float value) { *y = c10::BFloat16(value).x; }  // rounds to nearest even

struct Problem {
  const kernels::Int8Rows& x;
  const kernels::IntWeights& w;
  const float* bias;
  int64_t weight_row_bytes, groups, shift;
};

// y[m0 .. m0+ROWS, n0 .. n0+COLS]: each weight vector is loaded once for all ROWS rows.
template <int BITS, int ROWS, int COLS, typename Out>
void tile(const Problem& p, Out* y, int64_t m0, int64_t n0) {
  const int64_t cols = p.x.cols, width = block_width(p.w.group), chunks_per_block = width / kChunk;
  const bool pairs = p.w.group == 32;
  Column w_cols[COLS];
  const uint16_t* w_scales[COLS];
  for (int j = 0; j < COLS; ++j) {
    const int64_t n = n0 + j;
    w_cols[j] = {static_cast<const uint8_t*>(p.w.packed) + n / kColTile * kColTile * p.weight_row_bytes, n % kColTile};
    w_scales[j] = static_cast<const uint16_t*>(p.w.scales) + n * p.groups;
  }
  __m512 sums[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) sums[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < p.x.blocks; ++b) {
    __m512i dots[ROWS][COLS];  // start from minus the offset times the group's activations
    for (int i = 0; i < ROWS; ++i) {
      const int32_t* neg = p.x.neg_sums + ((m0 + i) * p.x.blocks + b) * 16;
      const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(neg), static_cast<unsigned>(p.shift));
      for (int j = 0; j < COLS; ++j) dots[i][j] = offset;
    }
    for (int64_t chunk = b * chunks_per_block; chunk < (b + 1) * chunks_per_block; ++chunk) {
      __m512i wv[COLS];
      for (int j = 0; j < COLS; ++j) wv[j] = weight_chunk<BITS>(w_cols[j], chunk, cols);
      for (int i = 0; i < ROWS; ++i) {
        const int8_t* xv = p.x.q + (m0 + i) * cols + chunk * kChunk;
        for (int j = 0; j < COLS; ++j) dot_add(dots[i][j], wv[j], xv);
      }
    }
    for (int j = 0; j < COLS; ++j) {
      const __m512 scale = scale_lanes(w_scales[j], b, pairs);
      for (int i = 0; i < ROWS; ++i) sums[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[i][j]), scale, sums[i][j]);
    }
  }
  const int64_t N = p.w.out_features;
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) {
      const float value = _mm512_reduce_add_ps(sums[i][j]) * p.x.scale[m0 + i] + (p.bias ? p.bias[n0 + j] : 0.f);
      store(y + (m0 + i) * N + n0 + j, value);
    }
}

template <int BITS, int ROW_TILE, int COLS, typename Out>
void rows_of(const Problem& p, Out* y, int64_t m_begin, int64_t m_end, int64_t n0) {
  int64_t m = m_begin;
  for (; m + ROW_TILE <= m_end; m += ROW_TILE) tile<BITS, ROW_TILE, COLS>(p, y, m, n0);
  if constexpr (ROW_TILE > 2) {
    for (; m + 2 <= m_end; m += 2) tile<BITS, 2, COLS>(p, y, m, n0);
  }
  for (; m < m_end; ++m) tile<BITS, 1, COLS>(p, y, m, n0);
}

template <int BITS, int ROW_TILE, typename Out>
void run(const Problem& p, Out* y, int64_t n_begin, int64_t n_end) {
  for (int64_t m0 = 0; m0 < p.x.rows; m0 += kRowBlock) {
    const int64_t m1 = std::min(p.x.rows, m0 + kRowBlock);
    int64_t n = n_begin;
    for (; n < n_end && n % kColTile; ++n) rows_of<BITS, ROW_TILE, 1>(p, y, m0, m1, n);
    for (; n + kColTile <= n_end; n += kColTile) rows_of<BITS, ROW_TILE, kColTile>(p, y, m0, m1, n);
    for (; n < n_end; ++n) rows_of<BITS, ROW_TILE, 1>(p, y, m0, m1, n);
  }
}

template <int BITS, typename Out>
void run_bits(const Problem& p, Out* y, int64_t n_begin, int64_t n_end) {
  if (p.w.group == 32) {
    run<BITS, kPairsRowTile>(p, y, n_begin, n_end);
  } else {
    run<BITS, kRowTile>(p, y, n_begin, n_end);
  }
}

template <typename Out>
void linear_columns(const kernels::Int8Rows& x, const kernels::IntWeights& w, const float* bias, Out* y,
                    int64_t n_begin, int64_t n_end) {
  const Problem p{x, w, bias, w.in_features * w.bits / 8, w.in_features / w.group, w.bits == 8 ? 7 : 3};
  if (w.bits == 8) {
    run_bits<8>(p, y, n_begin, n_end);
  } else {
    run_bits<4>(p, y, n_begin, n_end);
  }
}

}  // namespace

#pragma GCC pop_options

int64_t kernels::int8_rows_workspace_bytes(int64_t rows, int64_t cols, int64_t group) {
  const int64_t blocks = cols / block_width(group);
  return kAlign + round_up(rows * cols, kAlign) + round_up(rows * int64_t(sizeof(float)), kAlign) +
         rows * blocks * 16 * int64_t(sizeof(int32_t));
}

kernels::Int8Rows kernels::int8_rows_in(void* workspace, int64_t rows, int64_t cols, int64_t group) {
  auto* base = reinterpret_cast<char*>(round_up(reinterpret_cast<intptr_t>(workspace), kAlign));
  Int8Rows out;
  out.blocks = cols / block_width(group);
  out.group = group;
  out.rows = rows;
  out.cols = cols;
  out.q = reinterpret_cast<int8_t*>(base);
  base += round_up(rows * cols, kAlign);
  out.scale = reinterpret_cast<float*>(base);
  base += round_up(rows * int64_t(sizeof(float)), kAlign);
  out.neg_sums = reinterpret_cast<int32_t*>(base);
  return out;
}

void kernels::quantize_rows(const uint16_t* x_bf16, Int8Rows& out) { quantize_all(x_bf16, out); }
void kernels::quantize_rows(const float* x, Int8Rows& out) { quantize_all(x, out); }

void kernels::int_weight_linear_columns(const Int8Rows& x, const IntWeights& w, const float* bias, uint16_t* y,
                                        int64_t n_begin, int64_t n_end) {
  linear_columns(x, w, bias, y, n_begin, n_end);
}

void kernels::int_weight_linear_columns(const Int8Rows& x, const IntWeights& w, const float* bias, float* y,
                                        int64_t n_begin, int64_t n_end) {
  linear_columns(x, w, bias, y, n_begin, n_end);
}
