// Decode attention on CPUs, read in place from the paged KV cache.
//
// The portable backend gathers every sequence's cached K/V into a padded batch in each layer
// and then runs a masked attention; at long contexts the copy costs more than the attention.
// Here each (sequence, KV head) pair walks its block table directly: scores for all query
// heads that share the KV head, a float32 softmax, then the weighted sum of values.
//
// A bfloat16 cache (a model computed in bfloat16) is widened to float32 in the loops, exactly.
// An int8 cache (kv_cache_dtype int8) is read the same way: each slot's K and V of a head are
// widened to float32 in the loops and multiplied by that slot's float32 scale, so the cache is
// never dequantized into a copy.
#include "cpu_kernels.h"
#include <ATen/Parallel.h>
#include <cmath>
#include <cstdint>
#include <vector>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")  // called only on CPUs with them (ATTENTION_CPU_FLAGS)

template <typename T>
static inline float dot(const float* a, const T* b, int64_t n) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * static_cast<float>(b[i]);
  return sum;
}

template <typename T>
static inline void add_scaled(float* out, const T* v, float weight, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += weight * static_cast<float>(v[i]);
}

// k_scales and v_scales are [slots, kv_heads] float32, or null for a cache stored unscaled.
template <typename T>
static torch::Tensor decode_attention(torch::Tensor q, const T* kp, const T* vp, const float* k_scales,
                                      const float* v_scales, int64_t kv_heads, torch::Tensor block_tables,
                                      torch::Tensor context_lens, int64_t block_size, double scale) {
  TORCH_CHECK(block_tables.scalar_type() == torch::kLong && context_lens.scalar_type() == torch::kLong,
              "block_tables and context_lens must be int64");
  q = q.contiguous();
  block_tables = block_tables.contiguous();
  context_lens = context_lens.contiguous();
  const int64_t batch = q.size(0), heads = q.size(1), head_dim = q.size(2);
  const int64_t max_blocks = block_tables.size(1);
  TORCH_CHECK(heads % kv_heads == 0, "heads must be a multiple of kv_heads");
  const int64_t group = heads / kv_heads;
  auto out = torch::zeros_like(q);
  const float* qp = q.data_ptr<float>();
  const int64_t* tables = block_tables.data_ptr<int64_t>();
  const int64_t* lens = context_lens.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  const float softmax_scale = static_cast<float>(scale);

  at::parallel_for(0, batch * kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / kv_heads, kv_head = item % kv_heads;
      const int64_t length = lens[b];
      TORCH_CHECK(length >= 1 && length <= max_blocks * block_size, "context length outside the block table");
      const int64_t* table = tables + b * max_blocks;
      scores.assign(group * length, 0.f);
      for (int64_t t = 0; t < length; ++t) {
        const int64_t slot = table[t / block_size] * block_size + t % block_size;
        const int64_t row = slot * kv_heads + kv_head;
        const T* key = kp + row * head_dim;
        const float key_scale = softmax_scale * (k_scales ? k_scales[row] : 1.f);
        for (int64_t g = 0; g < group; ++g) {
          const float* query = qp + (b * heads + kv_head * group + g) * head_dim;
          scores[g * length + t] = dot(query, key, head_dim) * key_scale;
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        float* row = scores.data() + g * length;
        float highest = row[0];
        for (int64_t t = 1; t < length; ++t) highest = std::max(highest, row[t]);
        float total = 0.f;
        for (int64_t t = 0; t < length; ++t) {
          row[t] = std::exp(row[t] - highest);
          total += row[t];
        }
        const float inverse = 1.f / total;
        for (int64_t t = 0; t < length; ++t) row[t] *= inverse;
      }
      for (int64_t t = 0; t < length; ++t) {
        const int64_t slot = table[t / block_size] * block_size + t % block_size;
        const int64_t row = slot * kv_heads + kv_head;
        const T* value = vp + row * head_dim;
        const float value_scale = v_scales ? v_scales[row] : 1.f;
        for (int64_t g = 0; g < group; ++g) {
          add_scaled(op + (b * heads + kv_head * group + g) * head_dim, value, scores[g * length + t] * value_scale,
                     head_dim);
        }
      }
    }
  });
  return out;
}

static void check_cache(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                        torch::ScalarType dtype, const char* message) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == torch::kFloat32, "q must be [batch, heads, head_dim] float32");
  TORCH_CHECK(k_cache.dim() == 3 && k_cache.scalar_type() == dtype && k_cache.is_contiguous() &&
                  v_cache.sizes() == k_cache.sizes() && v_cache.scalar_type() == dtype && v_cache.is_contiguous(),
              message);
  TORCH_CHECK(k_cache.size(2) == q.size(2), "head_dim of q and of the cache must match");
}

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                     torch::Tensor block_tables, torch::Tensor context_lens, int64_t block_size,
                                     double scale) {
  check_cache(q, k_cache, v_cache, torch::kFloat32, "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] float32");
  return decode_attention<float>(q, k_cache.data_ptr<float>(), v_cache.data_ptr<float>(), nullptr, nullptr,
                                 k_cache.size(1), block_tables, context_lens, block_size, scale);
}

torch::Tensor paged_decode_attention_bf16(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                          torch::Tensor block_tables, torch::Tensor context_lens, int64_t block_size,
                                          double scale) {
  check_cache(q, k_cache, v_cache, torch::kBFloat16,
              "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] bfloat16");
  return decode_attention<at::BFloat16>(q, k_cache.data_ptr<at::BFloat16>(), v_cache.data_ptr<at::BFloat16>(),
                                        nullptr, nullptr, k_cache.size(1), block_tables, context_lens, block_size,
                                        scale);
}

torch::Tensor paged_decode_attention_int8(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                          torch::Tensor k_scales, torch::Tensor v_scales, torch::Tensor block_tables,
                                          torch::Tensor context_lens, int64_t block_size, double scale) {
  check_cache(q, k_cache, v_cache, torch::kInt8, "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] int8");
  const auto scale_shape = k_cache.sizes().slice(0, 2);
  TORCH_CHECK(k_scales.scalar_type() == torch::kFloat32 && k_scales.is_contiguous() && k_scales.sizes() == scale_shape &&
                  v_scales.scalar_type() == torch::kFloat32 && v_scales.is_contiguous() && v_scales.sizes() == scale_shape,
              "k_scales and v_scales must be contiguous [slots, kv_heads] float32");
  return decode_attention<int8_t>(q, k_cache.data_ptr<int8_t>(), v_cache.data_ptr<int8_t>(), k_scales.data_ptr<float>(),
                                  v_scales.data_ptr<float>(), k_cache.size(1), block_tables, context_lens, block_size,
                                  scale);
}

#pragma GCC pop_options
