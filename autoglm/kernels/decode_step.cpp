// The native decode step: a whole decoder stack for a few rows of one token each, as one call.
//
// Layer by layer, a decode step of a small model is hundreds of PyTorch ops and kernel calls, each
// paying Python, dispatch and a fork and join of the thread pool: on 2 cores that overhead is as long as
// streaming the weights. Here the threads enter one parallel region per step and meet at a barrier
// between the ops that depend on each other. Each op is the very function the layer-by-layer forward
// calls (the linear kernels over a share of the output columns, attention over a share of the
// (sequence, KV head) pairs, the fused norms, rotary and activation), with every rounding where that
// forward rounds, so a token's result is bit-identical whichever path computed it.
#include "cpu_kernels.h"

#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace {

using kernels::LinearKind;
using kernels::StepBatch;
using kernels::StepLayer;
using kernels::StepLinear;
using kernels::StepModel;

constexpr int64_t kColumnAlign = 16;  // columns per share unit: whole tiles of every linear kernel

// Thread `t` of `threads`' share [begin, end) of `n` items, in units of `align`.
std::pair<int64_t, int64_t> share(int64_t n, int t, int threads, int64_t align) {
  const int64_t units = (n + align - 1) / align, per = units / threads, extra = units % threads;
  const int64_t begin = t * per + std::min<int64_t>(t, extra), end = begin + per + (t < extra ? 1 : 0);
  return {std::min(n, begin * align), std::min(n, end * align)};
}

#include "bf16_bits.h"

inline float widen(float v) { return v; }
inline float widen(uint16_t half) { return bf16_bits_to_float(half); }

// float32 to the activations' dtype as PyTorch casts: bfloat16 rounded to nearest even.
inline void narrow(float v, float* out) { *out = v; }
inline void narrow(float v, uint16_t* out) { *out = float_to_bf16_bits(v); }

// The buffers of one step, carved from the caller's workspace: T [rows, width] each, and float32 ones.
template <typename T>
struct Buffers {
  T* residual;
  T* qkv;
  T* attended;  // attention's output in the activations' dtype
  T* gate_up;
  T* activated;
  float* queries;  // float32 queries for the attention kernel
  float* attended_f32;
  void* quantized;  // int8 activations for int-a8 projections
};

int64_t qkv_width(const StepModel& m) { return (m.heads + 2 * m.kv_heads) * m.head_dim; }

#ifdef AUTOGLM_KERNELS_AVX512_VNNI
int64_t quantized_bytes(const StepModel& m, int64_t rows) {
  int64_t bytes = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) {
    for (const StepLinear* linear : {&m.layers[l].qkv, &m.layers[l].o, &m.layers[l].gate_up, &m.layers[l].down}) {
      if (linear->kind == LinearKind::kIntA8) {
        bytes = std::max(bytes, kernels::int8_rows_workspace_bytes(rows, linear->in_features, linear->group));
      }
    }
  }
  return bytes;
}
#else
int64_t quantized_bytes(const StepModel&, int64_t) { return 0; }
#endif

int64_t round_up_64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Sizes in bytes of each buffer, in Buffers' order.
std::array<int64_t, 8> buffer_bytes(const StepModel& m, int64_t rows, int64_t element) {
  const int64_t query_width = m.heads * m.head_dim;
  return {round_up_64(rows * m.hidden * element),        round_up_64(rows * qkv_width(m) * element),
          round_up_64(rows * query_width * element),     round_up_64(rows * 2 * m.intermediate * element),
          round_up_64(rows * m.intermediate * element),  round_up_64(rows * query_width * 4),
          round_up_64(rows * query_width * 4),           round_up_64(quantized_bytes(m, rows))};
}

template <typename T>
Buffers<T> carve(const StepModel& m, int64_t rows, void* workspace) {
  const auto sizes = buffer_bytes(m, rows, sizeof(T));
  char* p = static_cast<char*>(workspace);
  std::array<char*, 8> at{};
  for (size_t i = 0; i < sizes.size(); ++i) {
    at[i] = p;
    p += sizes[i];
  }
  return {reinterpret_cast<T*>(at[0]), reinterpret_cast<T*>(at[1]), reinterpret_cast<T*>(at[2]),
          reinterpret_cast<T*>(at[3]), reinterpret_cast<T*>(at[4]), reinterpret_cast<float*>(at[5]),
          reinterpret_cast<float*>(at[6]), at[7]};
}

// Quantize `x` [rows, in] for an int-a8 projection (the lead thread, before the barrier its product waits at).
template <typename T>
void prepare_input(const StepLinear& linear, const T* x, int64_t rows, void* quantized) {
#ifdef AUTOGLM_KERNELS_AVX512_VNNI
  if (linear.kind == LinearKind::kIntA8) {
    kernels::Int8Rows q = kernels::int8_rows_in(quantized, rows, linear.in_features, linear.group);
    kernels::quantize_rows(x, q);
  }
#endif
}

// An int-a8 projection's columns from the activations prepare_input quantized; false for any other kind.
template <typename T>
bool int_a8_columns(const StepLinear& l, const void* quantized, T* y, int64_t rows, int64_t n_begin, int64_t n_end) {
#ifdef AUTOGLM_KERNELS_AVX512_VNNI
  if (l.kind == LinearKind::kIntA8) {
    const kernels::Int8Rows q = kernels::int8_rows_in(const_cast<void*>(quantized), rows, l.in_features, l.group);
    kernels::int_weight_linear_columns(q, {l.weight, l.scales, l.out_features, l.in_features, l.group, l.bits},
                                       l.bias, y, n_begin, n_end);
    return true;
  }
#endif
  return false;
}

// Columns [n_begin, n_end) of y [rows, out] = x W^T + b with the projection's kernel.
void linear_columns(const StepLinear& l, const uint16_t* x, const void* quantized, uint16_t* y, int64_t rows,
                    int64_t n_begin, int64_t n_end) {
  if (int_a8_columns(l, quantized, y, rows, n_begin, n_end)) return;
#ifdef AUTOGLM_KERNELS_AVX512_BF16
  kernels::bf16_dot_linear_columns(x, static_cast<const uint16_t*>(l.weight), l.bias, y, rows, l.in_features,
                                   l.out_features, n_begin, n_end);
#endif
}

void linear_columns(const StepLinear& l, const float* x, const void* quantized, float* y, int64_t rows,
                    int64_t n_begin, int64_t n_end) {
  if (int_a8_columns(l, quantized, y, rows, n_begin, n_end)) return;
  kernels::bf16_weight_linear_avx512_columns(x, static_cast<const uint16_t*>(l.weight), y, rows, l.in_features,
                                             l.out_features, n_begin, n_end);
  if (l.bias != nullptr) {  // added after the product, as `y + bias` is in the layer-by-layer forward
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = n_begin; n < n_end; ++n) y[r * l.out_features + n] += l.bias[n];
  }
}

template <typename T>
class Step {
 public:
  Step(const StepModel& m, const StepBatch& b, T* hidden, void* workspace)
      : m_(m), b_(b), hidden_(hidden), buf_(carve<T>(m, b.rows, workspace)) {}

  void run() {
#pragma omp parallel num_threads(at::get_num_threads())
    run_thread();
  }

 private:
  // Every thread runs this; `lead` blocks are the row-wise work too small to share.
  void run_thread() {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t rows = b_.rows, hidden = m_.hidden;
    if (t == 0) {
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(buf_.residual + r * hidden, static_cast<const T*>(m_.embedding) + b_.tokens[r] * hidden,
                    hidden * sizeof(T));
      }
    }
    for (int64_t l = 0; l < m_.num_layers; ++l) {
      const StepLayer& layer = m_.layers[l];
      if (t == 0) {
        if (l == 0) {  // the embedding is the whole stream: normed, and kept as the residual
          kernels::rms_norm_rows(buf_.residual, norm(layer.input_norm), hidden_, 0, rows, hidden, m_.eps);
        } else {
          kernels::fused_add_rms_norm_rows(hidden_, buf_.residual, norm(layer.input_norm), 0, rows, hidden, m_.eps);
        }
        prepare_input(layer.qkv, hidden_, rows, buf_.quantized);
      }
#pragma omp barrier
      project(layer.qkv, hidden_, buf_.qkv, t, threads);
#pragma omp barrier
      for (int64_t r = t; r < rows; r += threads) position_row(layer, r);
#pragma omp barrier
      attend(layer, t, threads);
#pragma omp barrier
      if (t == 0) {
        narrow_attended();
        prepare_input(layer.o, buf_.attended, rows, buf_.quantized);
      }
#pragma omp barrier
      project(layer.o, buf_.attended, hidden_, t, threads);
#pragma omp barrier
      if (t == 0) {
        if (layer.post_self_attn_norm != nullptr) {
          kernels::rms_norm_rows(hidden_, norm(layer.post_self_attn_norm), hidden_, 0, rows, hidden, m_.eps);
        }
        kernels::fused_add_rms_norm_rows(hidden_, buf_.residual, norm(layer.post_attention_norm), 0, rows, hidden,
                                         m_.eps);
        prepare_input(layer.gate_up, hidden_, rows, buf_.quantized);
      }
#pragma omp barrier
      project(layer.gate_up, hidden_, buf_.gate_up, t, threads);
#pragma omp barrier
      const auto [c_begin, c_end] = share(m_.intermediate, t, threads, kColumnAlign);
      kernels::silu_and_mul_columns(buf_.gate_up, buf_.activated, rows, m_.intermediate, c_begin, c_end);
#pragma omp barrier
      if (layer.down.kind == LinearKind::kIntA8) {
        if (t == 0) prepare_input(layer.down, buf_.activated, rows, buf_.quantized);
#pragma omp barrier
      }
      project(layer.down, buf_.activated, hidden_, t, threads);
#pragma omp barrier
      if (t == 0 && layer.post_mlp_norm != nullptr) {
        kernels::rms_norm_rows(hidden_, norm(layer.post_mlp_norm), hidden_, 0, rows, hidden, m_.eps);
      }
    }
    if (t == 0) {
      kernels::fused_add_rms_norm_rows(hidden_, buf_.residual, norm(m_.final_norm), 0, rows, hidden, m_.eps);
    }
  }

  static const T* norm(const void* weight) { return static_cast<const T*>(weight); }

  void project(const StepLinear& linear, const T* x, T* y, int t, int threads) {
    const auto [begin, end] = share(linear.out_features, t, threads, kColumnAlign);
    if (begin < end) linear_columns(linear, x, buf_.quantized, y, b_.rows, begin, end);
  }

  // One row's q/k norms and rotary, its K and V into the cache, its queries widened for attention.
  void position_row(const StepLayer& layer, int64_t r) {
    const int64_t dim = m_.head_dim, query_width = m_.heads * dim, kv_width = m_.kv_heads * dim;
    T* q = buf_.qkv + r * qkv_width(m_);
    T* k = q + query_width;
    const T* v = k + kv_width;
    if (layer.q_norm != nullptr) {
      kernels::rms_norm_rows(q, norm(layer.q_norm), q, 0, m_.heads, dim, m_.eps);
      kernels::rms_norm_rows(k, norm(layer.k_norm), k, 0, m_.kv_heads, dim, m_.eps);
    }
    const T* cos = static_cast<const T*>(b_.cos) + r * m_.rotary_dim;
    const T* sin = static_cast<const T*>(b_.sin) + r * m_.rotary_dim;
    kernels::rotary_rows({q, m_.heads, 0, dim}, cos, sin, 0, 1, m_.rotary_dim, m_.interleaved_rotary);
    kernels::rotary_rows({k, m_.kv_heads, 0, dim}, cos, sin, 0, 1, m_.rotary_dim, m_.interleaved_rotary);
    const int64_t slot = b_.slots[r];
    std::memcpy(static_cast<T*>(layer.k_cache) + slot * kv_width, k, kv_width * sizeof(T));
    std::memcpy(static_cast<T*>(layer.v_cache) + slot * kv_width, v, kv_width * sizeof(T));
    float* widened = buf_.queries + r * query_width;
    for (int64_t i = 0; i < query_width; ++i) widened[i] = widen(q[i]);
    std::fill_n(buf_.attended_f32 + r * query_width, query_width, 0.f);
  }

  void attend(const StepLayer& layer, int t, int threads) {
    const kernels::DecodeAttention call{buf_.queries, buf_.attended_f32, b_.block_tables, b_.context_lens,
                                        nullptr, nullptr, b_.rows, m_.heads, m_.kv_heads, m_.head_dim,
                                        b_.max_blocks, m_.block_size, m_.attention_scale};
    const auto [begin, end] = share(b_.rows * m_.kv_heads, t, threads, 1);
    if (begin < end) {
      kernels::paged_decode_attention_items(call, static_cast<const T*>(layer.k_cache),
                                            static_cast<const T*>(layer.v_cache), begin, end);
    }
  }

  // Attention's float32 output in the activations' dtype, as `out.to(q.dtype)` rounds it.
  void narrow_attended() {
    const int64_t count = b_.rows * m_.heads * m_.head_dim;
    for (int64_t i = 0; i < count; ++i) narrow(buf_.attended_f32[i], buf_.attended + i);
  }

  const StepModel& m_;
  const StepBatch& b_;
  T* hidden_;
  Buffers<T> buf_;
};

}  // namespace

int64_t kernels::decode_step_workspace_bytes(const StepModel& model, int64_t rows, bool bf16) {
  const auto sizes = buffer_bytes(model, rows, bf16 ? 2 : 4);
  int64_t total = 0;
  for (const int64_t size : sizes) total += size;
  return total;
}

void kernels::decode_step(const StepModel& model, const StepBatch& batch, float* hidden, void* workspace) {
  Step<float>(model, batch, hidden, workspace).run();
}

void kernels::decode_step(const StepModel& model, const StepBatch& batch, uint16_t* hidden, void* workspace) {
  Step<uint16_t>(model, batch, hidden, workspace).run();
}
