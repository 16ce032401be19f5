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

// The same two products for output columns [n_begin, n_end) only, on the calling thread: what each
// thread of the native decode step (decode_step.cpp) computes; every column is summed in the same
// order whatever the range.
void bf16_dot_linear_columns(const uint16_t* x, const uint16_t* w, const float* bias, uint16_t* y, int64_t M,
                             int64_t K, int64_t N, int64_t n_begin, int64_t n_end);
void bf16_weight_linear_avx512_columns(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K, int64_t N,
                                       int64_t n_begin, int64_t n_end);

// int8/int4 weights times activations quantized to int8 per row (int8_activation_linear.cpp). AVX512-VNNI.
// Activations quantized for the int-weight kernels: symmetric, one scale per row (max|x| / 127), and minus the
// sums of each group's values, all carved out of one caller-provided workspace (int8_rows_workspace_bytes).
// cols is a multiple of 64; group is 32 or a multiple of 64 dividing cols.
struct Int8Rows {
  int8_t* q;          // [rows, cols]
  float* scale;       // [rows]
  int32_t* neg_sums;  // [rows, blocks, 16]: a block is 64 columns for groups of 32, else a group
  int64_t blocks, group;
  int64_t rows, cols;
};
int64_t int8_rows_workspace_bytes(int64_t rows, int64_t cols, int64_t group);
Int8Rows int8_rows_in(void* workspace, int64_t rows, int64_t cols, int64_t group);
void quantize_rows(const uint16_t* x_bf16, Int8Rows& out);  // x [rows, cols] bfloat16 bits
void quantize_rows(const float* x, Int8Rows& out);
// packed: uint8 in the layout int8_activation_linear.cpp describes; scales: bfloat16 bits [out, in / group].
struct IntWeights {
  const void* packed;
  const void* scales;
  int64_t out_features, in_features, group, bits;
};
// y[:, n_begin:n_end] = x_q * x_scale @ (w_q * w_scale)^T + bias, summed in float32 (int32 within a group);
// y [rows, out_features] row-major, bfloat16 bits (rounded to nearest even) or float32; bias float32 [out] or
// null. Starts no threads: callers run column ranges in parallel, and each element is computed in one order
// whatever the range and the other rows.
void int_weight_linear_columns(const Int8Rows& x, const IntWeights& w, const float* bias, uint16_t* y,
                               int64_t n_begin, int64_t n_end);
void int_weight_linear_columns(const Int8Rows& x, const IntWeights& w, const float* bias, float* y,
                               int64_t n_begin, int64_t n_end);

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
// Items [begin, end) of the batch * kv_heads (sequence, KV head) pairs, on the calling thread.
void paged_decode_attention_items(const DecodeAttention& call, const float* k_cache, const float* v_cache,
                                  int64_t begin, int64_t end);
void paged_decode_attention_items(const DecodeAttention& call, const uint16_t* k_cache, const uint16_t* v_cache,
                                  int64_t begin, int64_t end);

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
// The same on rows [begin, end) only, on the calling thread (the native decode step's).
void fused_add_rms_norm_rows(float* x, float* residual, const float* weight, int64_t begin, int64_t end,
                             int64_t width, float eps);
void fused_add_rms_norm_rows(uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t begin, int64_t end,
                             int64_t width, float eps);
void rms_norm_rows(const float* x, const float* weight, float* out, int64_t begin, int64_t end, int64_t width,
                   float eps);
void rms_norm_rows(const uint16_t* x, const uint16_t* weight, uint16_t* out, int64_t begin, int64_t end,
                   int64_t width, float eps);
void rotary_rows(RotaryHeads<float> x, const float* cos, const float* sin, int64_t begin, int64_t end,
                 int64_t rotary_dim, bool interleaved);
void rotary_rows(RotaryHeads<uint16_t> x, const uint16_t* cos, const uint16_t* sin, int64_t begin, int64_t end,
                 int64_t rotary_dim, bool interleaved);

// out[r, c] = silu(x[r, c]) * x[r, inner + c] for x [rows, 2 * inner] (an MLP's gate and up side by side),
// columns [c_begin, c_end) of every row, on the calling thread; rounded where PyTorch's bfloat16
// `silu(gate) * up` rounds (silu_and_mul.cpp). AVX-512.
void silu_and_mul_columns(const float* x, float* out, int64_t rows, int64_t inner, int64_t c_begin, int64_t c_end);
void silu_and_mul_columns(const uint16_t* x, uint16_t* out, int64_t rows, int64_t inner, int64_t c_begin,
                          int64_t c_end);

}  // namespace kernels

namespace kernels {

// ---- the native decode step (decode_step.cpp): a whole decoder stack for rows of one token each ----

enum class LinearKind : int { kBf16Dot = 0, kBf16Weight = 1, kIntA8 = 2 };

// One projection as the step multiplies by it: bf16-dot (bfloat16 activations, AVX512-BF16), bf16-weight
// (float32 activations, a bfloat16 weight; AVX-512) or int-a8 (int8/int4 weights, int8 activations).
struct StepLinear {
  LinearKind kind;
  const void* weight;  // bfloat16 [out, in], or the int-a8 kernel's packed weights
  const void* scales;  // the int-a8 kernel's scales, else null
  const float* bias;   // [out] or null
  int64_t out_features, in_features, bits, group;
};

// One decoder layer; norms are [hidden] (q/k norms [head_dim]) in the activations' dtype, null where the
// family has none; the cache [slots, kv_heads, head_dim] holds the activations' dtype.
struct StepLayer {
  StepLinear qkv, o, gate_up, down;
  const void* input_norm;
  const void* post_attention_norm;
  const void* post_self_attn_norm;  // the sandwich norms (GLM-4), or null
  const void* post_mlp_norm;
  const void* q_norm;  // per-head norms (Qwen3), or null
  const void* k_norm;
  void* k_cache;
  void* v_cache;
};

struct StepModel {
  const StepLayer* layers;
  int64_t num_layers;
  const void* embedding;  // [vocab, hidden]
  const void* final_norm;
  int64_t hidden, heads, kv_heads, head_dim, intermediate, rotary_dim, block_size;
  bool interleaved_rotary;
  float eps, attention_scale;
};

// A step's rows, one new token each: its id, rotary cos and sin [rows, rotary_dim] (activations' dtype),
// its cache slot, block table [rows, max_blocks] and context length once written.
struct StepBatch {
  int64_t rows;
  const int64_t* tokens;
  const void* cos;
  const void* sin;
  const int64_t* slots;
  const int64_t* block_tables;
  int64_t max_blocks;
  const int64_t* context_lens;
};

int64_t decode_step_workspace_bytes(const StepModel& model, int64_t rows, bool bf16);
// hidden [rows, hidden] = the final norm of the stack's output, computed as the layer-by-layer forward
// computes it (the same kernels, the same roundings), on the torch thread pool's count of threads.
void decode_step(const StepModel& model, const StepBatch& batch, float* hidden, void* workspace);
void decode_step(const StepModel& model, const StepBatch& batch, uint16_t* hidden, void* workspace);

}  // namespace kernels
