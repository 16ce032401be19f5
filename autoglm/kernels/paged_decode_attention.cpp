// Decode attention on CPUs, read in place from the paged KV cache.
//
// The portable backend gathers every sequence's cached K/V into a padded batch in each layer
// and then runs a masked attention; at long contexts the copy costs more than the attention.
// Here each (sequence, KV head) pair walks its block table directly, in three passes over its
// context, with AVX-512 registers throughout:
//   scores   each key is widened to float32 once, into a small tile of 16 keys, and every query
//            head of the group is dotted with the whole tile; the 16 per-key vector sums are
//            reduced together (one transpose-and-add), not one horizontal sum per score;
//   softmax  a vectorised exp of the scores less their maximum, summed in float32;
//   values   each value row is widened once and multiplied into every query's output row, the
//            outputs kept in registers over a tile of positions; divided by the sum at the end.
//
// A bfloat16 cache (a model computed in bfloat16) is widened to float32 with a shift, exactly.
// An int8 cache (kv_cache_dtype int8) is read the same way: each slot's K and V of a head are
// widened to float32 in the loops, and its float32 scales multiply that slot's score and its
// softmax weight, so the cache is never dequantized into a copy.
#include "cpu_kernels.h"
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")  // called only on CPUs with them (ATTENTION_CPU_FLAGS)

namespace {

#include "exp_avx512.h"

constexpr int64_t kLanes = 16;      // floats in a register
constexpr int kKeyTile = 16;        // keys scored together: one register of scores per query
constexpr int64_t kValueTile = 64;  // positions summed in registers before the outputs go back to memory
constexpr int kQueryBlock = 8;      // output rows held in registers in the value pass

inline __mmask16 lanes_below(int64_t n) {
  return n >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

inline int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Up to 16 elements (those `mask` selects, zero elsewhere) widened to float32, exactly.
inline __m512 widen(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }

inline __m512 widen(const uint16_t* p, __mmask16 mask) {  // a bfloat16 is the top half of a float32
  const __m256i bits = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

inline __m512 widen(const int8_t* p, __mmask16 mask) {
  const __m128i bytes = _mm512_castsi512_si128(_mm512_maskz_loadu_epi8(mask, p));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
}

template <typename T>
inline void prefetch_rows(const T* base, const int64_t* rows, int64_t count, int64_t head_dim) {
  const int64_t bytes = head_dim * static_cast<int64_t>(sizeof(T));
  for (int64_t t = 0; t < count; ++t) {
    const char* row = reinterpret_cast<const char*>(base + rows[t] * head_dim);
    for (int64_t offset = 0; offset < bytes; offset += 64) _mm_prefetch(row + offset, _MM_HINT_T0);
  }
}

// [a0+a1, a2+a3, b0+b1, b2+b3] of the 128-bit lanes of a and b.
inline __m512 fold_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane j of the result is the sum of the 16 lanes of v[j]: pairs, then quads, combined within
// 128-bit lanes, then the four 128-bit lanes folded together.
inline __m512 sum_each(const __m512 (&v)[kKeyTile]) {
  __m512 quads[4];  // 128-bit lane k of quads[i]: v[4i .. 4i+3], each summed over its own lane k
  for (int i = 0; i < 4; ++i) {
    const __m512* w = v + 4 * i;
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(w[0], w[1]), _mm512_unpackhi_ps(w[0], w[1]));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(w[2], w[3]), _mm512_unpackhi_ps(w[2], w[3]));
    quads[i] = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return fold_lanes(fold_lanes(quads[0], quads[1]), fold_lanes(quads[2], quads[3]));
}

// One query's scores against a tile of widened keys, [kKeyTile][stride] floats, zero past head_dim.
inline __m512 score_tile(const float* query, const float* keys, int64_t stride) {
  __m512 acc[kKeyTile];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t d = 0; d < stride; d += kLanes) {
    const __m512 q = _mm512_loadu_ps(query + d);
    for (int j = 0; j < kKeyTile; ++j) acc[j] = _mm512_fmadd_ps(q, _mm512_loadu_ps(keys + j * stride + d), acc[j]);
  }
  return sum_each(acc);
}

// NQ output rows (head_dim apart), 16 lanes of them from `d` on: += weights[q][t] * values[rows[t]].
template <int NQ, typename T>
void accumulate_values(float* out, const float* weights, int64_t weight_stride, const T* values,
                       const int64_t* rows, int64_t count, int64_t head_dim, int64_t d, __mmask16 mask) {
  __m512 acc[NQ];
  for (int q = 0; q < NQ; ++q) acc[q] = _mm512_maskz_loadu_ps(mask, out + q * head_dim + d);
  for (int64_t t = 0; t < count; ++t) {
    const __m512 value = widen(values + rows[t] * head_dim + d, mask);
    for (int q = 0; q < NQ; ++q) acc[q] = _mm512_fmadd_ps(_mm512_set1_ps(weights[q * weight_stride + t]), value, acc[q]);
  }
  for (int q = 0; q < NQ; ++q) _mm512_mask_storeu_ps(out + q * head_dim + d, mask, acc[q]);
}

// accumulate_values<n + 1> at index n: the value pass picks its block of queries at run time.
template <typename T, int... N>
constexpr auto value_kernels(std::integer_sequence<int, N...>) {
  return std::array{&accumulate_values<N + 1, T>...};
}

// k_scales and v_scales are [slots, kv_heads] float32, or null for a cache stored unscaled.
template <typename T>
struct PagedCache {
  const T* keys;  // [slots, kv_heads, head_dim]
  const T* values;
  const float* key_scales;
  const float* value_scales;
  int64_t kv_heads;
  int64_t head_dim;
};

// Buffers one thread reuses across its (sequence, KV head) items.
struct Scratch {
  std::vector<int64_t> rows;         // [length] the cache row (slot * kv_heads + kv_head) of each position
  std::vector<float> queries;        // [group][padded head_dim] times the softmax scale, zero past head_dim
  std::vector<float> keys;           // [kKeyTile][padded head_dim] widened, zero past head_dim
  std::vector<float> weights;        // [group][length] scores, then softmax numerators (times value scales)
  std::vector<float> totals;         // [group] the sums of the numerators
  std::vector<float> key_scales;     // [length] for a scaled cache: each position's slot's scales
  std::vector<float> value_scales;   // [length]
};

template <typename T>
class GroupAttention {
 public:
  GroupAttention(const PagedCache<T>& cache, int64_t group, int64_t length, float softmax_scale, Scratch& s)
      : cache_(cache), group_(group), length_(length), dim_(cache.head_dim),
        padded_dim_(round_up(cache.head_dim, kLanes)), softmax_scale_(softmax_scale), s_(s) {}

  // out [group, head_dim] = attention of `queries` [group, head_dim] over the KV head's context.
  void run(const float* queries, float* out, const int64_t* table, int64_t block_size, int64_t kv_head) {
    locate(table, block_size, kv_head);
    load_queries(queries);
    score();
    softmax();
    accumulate(out);
    for (int64_t g = 0; g < group_; ++g) {
      const __m512 inverse = _mm512_set1_ps(1.f / s_.totals[g]);
      for (int64_t d = 0; d < dim_; d += kLanes) {
        const __mmask16 mask = lanes_below(dim_ - d);
        float* row = out + g * dim_ + d;
        _mm512_mask_storeu_ps(row, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row), inverse));
      }
    }
  }

 private:
  void locate(const int64_t* table, int64_t block_size, int64_t kv_head) {
    s_.rows.resize(length_);
    for (int64_t t = 0; t < length_; ++t) {
      s_.rows[t] = (table[t / block_size] * block_size + t % block_size) * cache_.kv_heads + kv_head;
    }
    if (cache_.key_scales == nullptr) return;
    s_.key_scales.resize(length_);
    s_.value_scales.resize(length_);
    for (int64_t t = 0; t < length_; ++t) {
      s_.key_scales[t] = cache_.key_scales[s_.rows[t]];
      s_.value_scales[t] = cache_.value_scales[s_.rows[t]];
    }
  }

  void load_queries(const float* queries) {
    s_.queries.resize(group_ * padded_dim_);
    const __m512 scale = _mm512_set1_ps(softmax_scale_);
    for (int64_t g = 0; g < group_; ++g) {
      for (int64_t d = 0; d < padded_dim_; d += kLanes) {
        const __m512 q = _mm512_maskz_loadu_ps(lanes_below(dim_ - d), queries + g * dim_ + d);
        _mm512_storeu_ps(s_.queries.data() + g * padded_dim_ + d, _mm512_mul_ps(q, scale));
      }
    }
  }

  void score() {
    s_.keys.resize(kKeyTile * padded_dim_);
    s_.weights.resize(group_ * length_);
    const int64_t* rows = s_.rows.data();
    for (int64_t t0 = 0; t0 < length_; t0 += kKeyTile) {
      const int64_t count = std::min<int64_t>(kKeyTile, length_ - t0);
      prefetch_rows(cache_.keys, rows + t0 + count, std::min<int64_t>(kKeyTile, length_ - t0 - count), dim_);
      for (int64_t j = 0; j < count; ++j) {
        const T* key = cache_.keys + rows[t0 + j] * dim_;
        for (int64_t d = 0; d < padded_dim_; d += kLanes) {
          _mm512_storeu_ps(s_.keys.data() + j * padded_dim_ + d, widen(key + d, lanes_below(dim_ - d)));
        }
      }
      const __mmask16 valid = lanes_below(count);
      for (int64_t g = 0; g < group_; ++g) {
        __m512 scores = score_tile(s_.queries.data() + g * padded_dim_, s_.keys.data(), padded_dim_);
        if (cache_.key_scales != nullptr) {
          scores = _mm512_mul_ps(scores, _mm512_maskz_loadu_ps(valid, s_.key_scales.data() + t0));
        }
        _mm512_mask_storeu_ps(s_.weights.data() + g * length_ + t0, valid, scores);
      }
    }
  }

  void softmax() {
    s_.totals.resize(group_);
    for (int64_t g = 0; g < group_; ++g) {
      float* row = s_.weights.data() + g * length_;
      __m512 highest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t t = 0; t < length_; t += kLanes) {
        const __mmask16 mask = lanes_below(length_ - t);
        highest = _mm512_mask_max_ps(highest, mask, highest, _mm512_maskz_loadu_ps(mask, row + t));
      }
      const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(highest));
      __m512 total = _mm512_setzero_ps();
      for (int64_t t = 0; t < length_; t += kLanes) {
        const __mmask16 mask = lanes_below(length_ - t);
        __m512 weight = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + t), shift));
        total = _mm512_mask_add_ps(total, mask, total, weight);
        if (cache_.value_scales != nullptr) {
          weight = _mm512_mul_ps(weight, _mm512_maskz_loadu_ps(mask, s_.value_scales.data() + t));
        }
        _mm512_mask_storeu_ps(row + t, mask, weight);
      }
      s_.totals[g] = _mm512_reduce_add_ps(total);
    }
  }

  void accumulate(float* out) {
    static constexpr auto kernels = value_kernels<T>(std::make_integer_sequence<int, kQueryBlock>{});
    const int64_t* rows = s_.rows.data();
    for (int64_t t0 = 0; t0 < length_; t0 += kValueTile) {
      const int64_t count = std::min(kValueTile, length_ - t0);
      prefetch_rows(cache_.values, rows + t0 + count, std::min(kValueTile, length_ - t0 - count), dim_);
      for (int64_t d = 0; d < dim_; d += kLanes) {
        const __mmask16 mask = lanes_below(dim_ - d);
        for (int64_t g0 = 0; g0 < group_; g0 += kQueryBlock) {
          const int64_t block = std::min<int64_t>(kQueryBlock, group_ - g0);
          kernels[block - 1](out + g0 * dim_, s_.weights.data() + g0 * length_ + t0, length_, cache_.values,
                             rows + t0, count, dim_, d, mask);
        }
      }
    }
  }

  const PagedCache<T>& cache_;
  const int64_t group_, length_, dim_, padded_dim_;
  const float softmax_scale_;
  Scratch& s_;
};

// Items [begin, end) of the (sequence, KV head) pairs: every query head of the group over that head's context.
template <typename T>
void attend_items(const kernels::DecodeAttention& call, const PagedCache<T>& cache, int64_t begin, int64_t end) {
  const int64_t group = call.heads / cache.kv_heads, head_dim = call.head_dim;
  Scratch scratch;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / cache.kv_heads, kv_head = item % cache.kv_heads;
    const int64_t first_row = (b * call.heads + kv_head * group) * head_dim;
    GroupAttention<T>(cache, group, call.context_lens[b], call.scale, scratch)
        .run(call.q + first_row, call.out + first_row, call.block_tables + b * call.max_blocks, call.block_size,
             kv_head);
  }
}

template <typename T>
PagedCache<T> paged_cache(const kernels::DecodeAttention& call, const T* k_cache, const T* v_cache) {
  return PagedCache<T>{k_cache, v_cache, call.key_scales, call.value_scales, call.kv_heads, call.head_dim};
}

template <typename T>
void decode_attention(const kernels::DecodeAttention& call, const T* k_cache, const T* v_cache) {
  const PagedCache<T> cache = paged_cache(call, k_cache, v_cache);
  at::parallel_for(0, call.batch * cache.kv_heads, 1,
                   [&](int64_t begin, int64_t end) { attend_items(call, cache, begin, end); });
}

}  // namespace

void kernels::paged_decode_attention(const DecodeAttention& call, const float* k_cache, const float* v_cache) {
  decode_attention(call, k_cache, v_cache);
}

void kernels::paged_decode_attention(const DecodeAttention& call, const uint16_t* k_cache, const uint16_t* v_cache) {
  decode_attention(call, k_cache, v_cache);
}

void kernels::paged_decode_attention(const DecodeAttention& call, const int8_t* k_cache, const int8_t* v_cache) {
  decode_attention(call, k_cache, v_cache);
}

void kernels::paged_decode_attention_items(const DecodeAttention& call, const float* k_cache, const float* v_cache,
                                           int64_t begin, int64_t end) {
  attend_items(call, paged_cache(call, k_cache, v_cache), begin, end);
}

void kernels::paged_decode_attention_items(const DecodeAttention& call, const uint16_t* k_cache,
                                           const uint16_t* v_cache, int64_t begin, int64_t end) {
  attend_items(call, paged_cache(call, k_cache, v_cache), begin, end);
}

#pragma GCC pop_options
