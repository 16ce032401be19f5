// The CPU kernels on raw pointers: plain C++ (of torch only its thread pool, <ATen/Parallel.h>), so
// each kernel file compiles in seconds. Only bindings.cpp includes torch's tensor and Python headers
// (most of a build's time); it checks the tensors and calls these. bfloat16 values travel as their
// bits, uint16_t.
//
// Each kernel that needs an instruction-set extension compiles its body for it alone (a
// `#pragma GCC target` region); its file is compiled only on a CPU that reports those flags
// (autoglm/kernels/cpu_kernel_sources.py), and Python calls it only there (linear_kernels.py).
#pragma once

#include <cstdint>

namespace kernels {

// y = x @ w.T for float32 x [M, K] and bfloat16 w [N, K], summed in float32 (K a multiple of 16, or 8 for AVX2).
void bf16_weight_linear_avx512(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N);
void bf16_weight_linear_avx2(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N);

// y = x @ w.T + bias for bfloat16 x [M, K] and w [N, K] (K a multiple of 32): float32 sums, bfloat16 y
// [M, N]; bias is float32 [N] or null. AVX512-BF16.
void bf16_dot_linear(const uint16_t* x, const uint16_t* w, const float* bias, uint16_t* y, int64_t M, int64_t K,
                     int64_t N);

// One query token per sequence against its paged K/V context (paged_decode_attention.cpp). AVX-512.
struct DecodeAttention {
  const float* q;                // [batch, heads, head_dim]
  float* out;                    // [batch, heads, head_dim], zeros on entry
  const int64_t* block_tables;   // [batch, max_blocks]
  const int64_t* context_lens;   // [batch], each in 1 .. max_blocks * block_size
  const float* key_scales;       // [slots, kv_heads] for an int8 cache, else null
  const float* value_scales;
  int64_t batch, heads, kv_heads, head_dim, max_blocks, block_size;
  float scale;
};
// The cache [slots, kv_heads, head_dim] in float32, bfloat16 or int8.
void paged_decode_attention(const DecodeAttention& call, const float* k_cache, const float* v_cache);
void paged_decode_attention(const DecodeAttention& call, const uint16_t* k_cache, const uint16_t* v_cache);
void paged_decode_attention(const DecodeAttention& call, const int8_t* k_cache, const int8_t* v_cache);

// A decoder layer's norms and rotary, fused, for float32 and bfloat16 (fused_elementwise.cpp). AVX2 + FMA.
// residual += x, then x = rms_norm(residual) * weight, both in place; rows of `width` contiguous values.
void fused_add_rms_norm(float* x, float* residual, const float* weight, int64_t rows, int64_t width, float eps);
void fused_add_rms_norm(uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t rows, int64_t width,
                        float eps);
void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t width, float eps);
void rms_norm(const uint16_t* x, const uint16_t* weight, uint16_t* out, int64_t rows, int64_t width, float eps);

// One of q and k: [tokens, heads, head_dim] with contiguous heads, `token_stride` and `head_stride` apart.
template <typename T>
struct RotaryHeads {
  T* values;
  int64_t heads, token_stride, head_stride;
};
// q and k rotated in place over their first rotary_dim values by cos and sin [tokens, rotary_dim]:
// interleaved pairs (GLM-4) or the two halves against each other.
void rotary(RotaryHeads<float> q, RotaryHeads<float> k, const float* cos, const float* sin, int64_t tokens,
            int64_t rotary_dim, bool interleaved);
void rotary(RotaryHeads<uint16_t> q, RotaryHeads<uint16_t> k, const uint16_t* cos, const uint16_t* sin,
            int64_t tokens, int64_t rotary_dim, bool interleaved);

}  // namespace kernels
