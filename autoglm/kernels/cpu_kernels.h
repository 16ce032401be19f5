// The CPU kernels built into one extension by autoglm/kernels/cpu_extension.py.
//
// The library is compiled for any x86-64 CPU; each kernel that needs an instruction-set
// extension compiles its body for it alone (a `#pragma GCC target` region), and Python calls it
// only where the CPU reports those flags (autoglm/kernels/linear_kernels.py).
#pragma once
#include <torch/extension.h>

#include <cstdint>
#include <optional>

// y = x @ w.T for float32 x [M, K] and bfloat16 w [N, K], summed in float32 (K a multiple of 16, or 8 for AVX2).
torch::Tensor linear_bf16_weight_avx512(torch::Tensor x, torch::Tensor w);
torch::Tensor linear_bf16_weight_avx2(torch::Tensor x, torch::Tensor w);
void bf16_weight_linear_avx512(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N);
void bf16_weight_linear_avx2(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N);

// y = x @ w.T + bias for bfloat16 x [M, K] and w [N, K] (K a multiple of 32): float32 sums, bfloat16 y. AVX512-BF16.
torch::Tensor linear_bf16_dot(torch::Tensor x, torch::Tensor w, std::optional<torch::Tensor> bias);

// One query token per sequence against its paged K/V context; see paged_decode_attention.cpp. AVX-512.
torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                     torch::Tensor block_tables, torch::Tensor context_lens, int64_t block_size,
                                     double scale);

// The same over a bfloat16 cache (float32 queries and results: the sums run in float32).
torch::Tensor paged_decode_attention_bf16(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                          torch::Tensor block_tables, torch::Tensor context_lens, int64_t block_size,
                                          double scale);
// The same over an int8 cache, each slot's K and V of a head times its float32 scale ([slots, kv_heads]).
torch::Tensor paged_decode_attention_int8(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                          torch::Tensor k_scales, torch::Tensor v_scales, torch::Tensor block_tables,
                                          torch::Tensor context_lens, int64_t block_size, double scale);
// A decoder layer's norms and rotary, fused, for float32 and bfloat16 (fused_elementwise.cpp). AVX2 + FMA.
// residual += x, then x = rms_norm(residual) * weight: both in place.
void fused_add_rms_norm(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps);
// q and k [tokens, heads, head_dim] rotated in place over their first rotary_dim values by cos and sin
// [tokens, rotary_dim]: interleaved pairs (GLM-4) or the two halves against each other.
void rotary_(torch::Tensor q, torch::Tensor k, torch::Tensor cos, torch::Tensor sin, bool interleaved);
