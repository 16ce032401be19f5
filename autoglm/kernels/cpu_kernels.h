// The CPU kernels built into one extension by autoglm/kernels/cpu_extension.py.
#pragma once
#include <torch/extension.h>

// y = x @ w.T for float32 x [M, K] and bfloat16 w [N, K], summed in float32.
torch::Tensor linear_bf16_weight(torch::Tensor x, torch::Tensor w);

// One query token per sequence against its paged K/V context; see paged_decode_attention.cpp.
torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                     torch::Tensor block_tables, torch::Tensor context_lens, int64_t block_size,
                                     double scale);

// The same over an int8 cache, each slot's K and V of a head times its float32 scale ([slots, kv_heads]).
torch::Tensor paged_decode_attention_int8(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                          torch::Tensor k_scales, torch::Tensor v_scales, torch::Tensor block_tables,
                                          torch::Tensor context_lens, int64_t block_size, double scale);
