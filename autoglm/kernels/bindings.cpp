// The kernels' Python functions: each checks its tensors, makes the result and calls the raw-pointer kernel.
//
// The only file that includes torch's headers, and only those it needs: <torch/extension.h> (all of
// torch's C++ API) tripled this file's compile time, most of a build's. A kernel this CPU cannot run
// is not compiled (AUTOGLM_KERNELS_AVX512, AUTOGLM_KERNELS_AVX512_BF16 and AUTOGLM_KERNELS_AVX512_VNNI
// name what was; autoglm/kernels/cpu_kernel_sources.py), and its Python function then says so when called.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "cpu_kernels.h"

namespace {

// bfloat16 data as its bits, as the kernels take it.
uint16_t* bf16_bits(const at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

[[noreturn]] void not_built(const char* function, const char* flags) {
  TORCH_CHECK(false, function, " was not compiled: this CPU lacks ", flags);
}

using WeightLinear = void (*)(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t);

at::Tensor bf16_weight_linear(at::Tensor x, at::Tensor w, int64_t k_multiple, WeightLinear kernel) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x must be a 2-D float32 tensor");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16 && w.is_contiguous(),
              "w must be a contiguous 2-D bfloat16 tensor");
  TORCH_CHECK(w.size(1) == x.size(1) && x.size(1) % k_multiple == 0,
              "in_features must match and be a multiple of ", k_multiple);
  x = x.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = at::empty({M, N}, x.options());
  kernel(x.data_ptr<float>(), bf16_bits(w), y.data_ptr<float>(), M, K, N);
  return y;
}

at::Tensor linear_bf16_weight_avx512(at::Tensor x, at::Tensor w) {
#ifdef AUTOGLM_KERNELS_AVX512
  return bf16_weight_linear(x, w, 16, kernels::bf16_weight_linear_avx512);
#else
  not_built("linear_bf16_weight_avx512", "avx512f and avx512bw");
#endif
}

at::Tensor linear_bf16_weight_avx2(at::Tensor x, at::Tensor w) {
  return bf16_weight_linear(x, w, 8, kernels::bf16_weight_linear_avx2);
}

at::Tensor linear_bf16_dot(at::Tensor x, at::Tensor w, std::optional<at::Tensor> bias) {
#ifdef AUTOGLM_KERNELS_AVX512_BF16
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kBFloat16, "x must be a 2-D bfloat16 tensor");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16 && w.is_contiguous(),
              "w must be a contiguous 2-D bfloat16 tensor");
  TORCH_CHECK(w.size(1) == x.size(1) && x.size(1) % 32 == 0, "in_features must match and be a multiple of 32");
  x = x.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  at::Tensor bias32;
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == N, "bias must be [out_features]");
    bias32 = bias->to(at::kFloat).contiguous();
  }
  auto y = at::empty({M, N}, x.options());
  kernels::bf16_dot_linear(bf16_bits(x), bf16_bits(w), bias32.defined() ? bias32.data_ptr<float>() : nullptr,
                           bf16_bits(y), M, K, N);
  return y;
#else
  not_built("linear_bf16_dot", "avx512f, avx512bw and avx512_bf16");
#endif
}

// ---- int8/int4 weights, int8 activations ----

constexpr int64_t kIntA8ColumnBlock = 16;  // output columns per task of the thread pool
constexpr int64_t kIntA8QuantizeRows = 16;  // rows quantized per task: a prompt's, in parallel

// Columns [n_begin, n_end) alone where n_end >= 0 (the others zero, one thread): what the native decode
// step asks of each thread, and how tests check that any range computes what the whole product does.
at::Tensor linear_int_a8(at::Tensor x, at::Tensor packed, at::Tensor scales, std::optional<at::Tensor> bias,
                         int64_t bits, int64_t group, int64_t n_begin, int64_t n_end) {
#ifdef AUTOGLM_KERNELS_AVX512_VNNI
  TORCH_CHECK(x.dim() == 2 && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
              "x must be a 2-D float32 or bfloat16 tensor");
  TORCH_CHECK(bits == 8 || bits == 4, "bits must be 8 or 4, got ", bits);
  const int64_t M = x.size(0), K = x.size(1), N = scales.size(0);
  TORCH_CHECK(K % 64 == 0, "in_features must be a multiple of 64, got ", K);
  TORCH_CHECK(group > 0 && (group == 32 || group % 64 == 0) && K % group == 0,
              "group must be 32 or a multiple of 64 dividing in_features, got ", group);
  TORCH_CHECK(scales.dim() == 2 && scales.scalar_type() == at::kBFloat16 && scales.is_contiguous() &&
                  scales.size(1) == K / group,
              "scales must be contiguous bfloat16 [out_features, in_features / group]");
  TORCH_CHECK(packed.dim() == 2 && packed.scalar_type() == at::kByte && packed.is_contiguous() &&
                  packed.size(0) == (N + 3) / 4 * 4 && packed.size(1) == K * bits / 8,
              "packed must be contiguous uint8 [out_features rounded up to 4, in_features * bits / 8]");
  at::Tensor bias32;
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == N, "bias must be [out_features]");
    bias32 = bias->to(at::kFloat).contiguous();
  }
  x = x.contiguous();
  auto workspace = at::empty({kernels::int8_rows_workspace_bytes(M, K, group)}, x.options().dtype(at::kByte));
  kernels::Int8Rows rows = kernels::int8_rows_in(workspace.data_ptr(), M, K, group);
  at::parallel_for(0, M, kIntA8QuantizeRows, [&](int64_t begin, int64_t end) {
    kernels::Int8Rows part = rows;  // rows [begin, end) of the workspace
    part.q += begin * K;
    part.scale += begin;
    part.neg_sums += begin * rows.blocks * 16;
    part.rows = end - begin;
    if (x.scalar_type() == at::kFloat) {
      kernels::quantize_rows(x.data_ptr<float>() + begin * K, part);
    } else {
      kernels::quantize_rows(bf16_bits(x) + begin * K, part);
    }
  });
  const kernels::IntWeights w{packed.data_ptr(), scales.data_ptr(), N, K, group, bits};
  const float* bias_data = bias32.defined() ? bias32.data_ptr<float>() : nullptr;
  auto columns = [&](const at::Tensor& y, int64_t begin, int64_t end) {
    if (y.scalar_type() == at::kFloat) {
      kernels::int_weight_linear_columns(rows, w, bias_data, y.data_ptr<float>(), begin, end);
    } else {
      kernels::int_weight_linear_columns(rows, w, bias_data, bf16_bits(y), begin, end);
    }
  };
  if (n_end >= 0) {
    TORCH_CHECK(0 <= n_begin && n_begin <= n_end && n_end <= N, "columns must lie in [0, out_features]");
    auto y = at::zeros({M, N}, x.options());
    columns(y, n_begin, n_end);
    return y;
  }
  auto y = at::empty({M, N}, x.options());
  const int64_t blocks = (N + kIntA8ColumnBlock - 1) / kIntA8ColumnBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    columns(y, begin * kIntA8ColumnBlock, std::min(N, end * kIntA8ColumnBlock));
  });
  return y;
#else
  not_built("linear_int_a8", "avx512f, avx512bw and avx512_vnni");
#endif
}

// ---- paged decode attention ----

void check_cache(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                 at::ScalarType dtype, const char* message) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == at::kFloat, "q must be [batch, heads, head_dim] float32");
  TORCH_CHECK(k_cache.dim() == 3 && k_cache.scalar_type() == dtype && k_cache.is_contiguous() &&
                  v_cache.sizes() == k_cache.sizes() && v_cache.scalar_type() == dtype && v_cache.is_contiguous(),
              message);
  TORCH_CHECK(k_cache.size(2) == q.size(2), "head_dim of q and of the cache must match");
}

// Checks the rest of the arguments and runs `kernel(call)` into a new output; `call` holds the tensors it
// points into (q, block_tables and context_lens made contiguous), alive until the kernel returns.
template <typename Kernel>
at::Tensor decode_attention(at::Tensor q, const at::Tensor& k_cache, at::Tensor block_tables,
                               at::Tensor context_lens, int64_t block_size, double scale, const float* key_scales,
                               const float* value_scales, Kernel kernel) {
  TORCH_CHECK(block_tables.scalar_type() == at::kLong && context_lens.scalar_type() == at::kLong,
              "block_tables and context_lens must be int64");
  q = q.contiguous();
  block_tables = block_tables.contiguous();
  context_lens = context_lens.contiguous();
  const int64_t batch = q.size(0), heads = q.size(1), head_dim = q.size(2), kv_heads = k_cache.size(1);
  const int64_t max_blocks = block_tables.size(1);
  TORCH_CHECK(heads % kv_heads == 0, "heads must be a multiple of kv_heads");
  const int64_t* lens = context_lens.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(lens[b] >= 1 && lens[b] <= max_blocks * block_size, "context length outside the block table");
  }
  auto out = at::zeros_like(q);
  kernel(kernels::DecodeAttention{q.data_ptr<float>(), out.data_ptr<float>(), block_tables.data_ptr<int64_t>(), lens,
                                  key_scales, value_scales, batch, heads, kv_heads, head_dim, max_blocks, block_size,
                                  static_cast<float>(scale)});
  return out;
}

#ifdef AUTOGLM_KERNELS_AVX512
template <typename T>
at::Tensor unscaled_attention(at::Tensor q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                 at::Tensor block_tables, at::Tensor context_lens, int64_t block_size,
                                 double scale, const T* k_data, const T* v_data) {
  return decode_attention(q, k_cache, block_tables, context_lens, block_size, scale, nullptr, nullptr,
                          [&](const kernels::DecodeAttention& call) {
                            kernels::paged_decode_attention(call, k_data, v_data);
                          });
}
#endif

at::Tensor paged_decode_attention(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache,
                                     at::Tensor block_tables, at::Tensor context_lens, int64_t block_size,
                                     double scale) {
#ifdef AUTOGLM_KERNELS_AVX512
  check_cache(q, k_cache, v_cache, at::kFloat, "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] float32");
  return unscaled_attention(q, k_cache, v_cache, block_tables, context_lens, block_size, scale,
                            k_cache.data_ptr<float>(), v_cache.data_ptr<float>());
#else
  not_built("paged_decode_attention", "avx512f and avx512bw");
#endif
}

at::Tensor paged_decode_attention_bf16(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache,
                                          at::Tensor block_tables, at::Tensor context_lens, int64_t block_size,
                                          double scale) {
#ifdef AUTOGLM_KERNELS_AVX512
  check_cache(q, k_cache, v_cache, at::kBFloat16,
              "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] bfloat16");
  const uint16_t* k_data = bf16_bits(k_cache);
  const uint16_t* v_data = bf16_bits(v_cache);
  return unscaled_attention(q, k_cache, v_cache, block_tables, context_lens, block_size, scale, k_data, v_data);
#else
  not_built("paged_decode_attention_bf16", "avx512f and avx512bw");
#endif
}

at::Tensor paged_decode_attention_int8(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache,
                                          at::Tensor k_scales, at::Tensor v_scales, at::Tensor block_tables,
                                          at::Tensor context_lens, int64_t block_size, double scale) {
#ifdef AUTOGLM_KERNELS_AVX512
  check_cache(q, k_cache, v_cache, at::kChar, "k_cache and v_cache must be contiguous [slots, kv_heads, head_dim] int8");
  const auto scale_shape = k_cache.sizes().slice(0, 2);
  TORCH_CHECK(k_scales.scalar_type() == at::kFloat && k_scales.is_contiguous() && k_scales.sizes() == scale_shape &&
                  v_scales.scalar_type() == at::kFloat && v_scales.is_contiguous() && v_scales.sizes() == scale_shape,
              "k_scales and v_scales must be contiguous [slots, kv_heads] float32");
  const int8_t* k_data = k_cache.data_ptr<int8_t>();
  const int8_t* v_data = v_cache.data_ptr<int8_t>();
  return decode_attention(q, k_cache, block_tables, context_lens, block_size, scale, k_scales.data_ptr<float>(),
                          v_scales.data_ptr<float>(), [&](const kernels::DecodeAttention& call) {
                            kernels::paged_decode_attention(call, k_data, v_data);
                          });
#else
  not_built("paged_decode_attention_int8", "avx512f and avx512bw");
#endif
}

// ---- the fused elementwise steps ----

// Runs body(T{}) for the tensor dtypes the checks below admit: float, or bfloat16 as its bits (uint16_t).
template <typename Body>
void for_dtype(at::ScalarType dtype, Body body) {
  if (dtype == at::kFloat) {
    body(float{});
  } else {
    body(uint16_t{});
  }
}

// A tensor's values as T (uint16_t for bfloat16).
template <typename T>
T* data(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

void check_float_or_bf16(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16),
              name, " must be a float32 or bfloat16 CPU tensor, got ", t.scalar_type(), " on ", t.device());
}

void check_norm_args(const at::Tensor& x, const at::Tensor& weight) {
  check_float_or_bf16(x, "x");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1) && weight.scalar_type() == x.scalar_type() &&
                  weight.is_contiguous(),
              "weight must be a contiguous 1-D tensor of x's last size and dtype");
}

void fused_add_rms_norm(at::Tensor x, at::Tensor residual, at::Tensor weight, double eps) {
  check_norm_args(x, weight);
  TORCH_CHECK(x.is_contiguous() && residual.is_contiguous() && residual.sizes() == x.sizes() &&
                  residual.scalar_type() == x.scalar_type(),
              "x and residual must be contiguous tensors of one shape and dtype");
  const int64_t width = x.size(-1), rows = x.numel() / std::max<int64_t>(width, 1);
  for_dtype(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    kernels::fused_add_rms_norm(data<scalar_t>(x), data<scalar_t>(residual), data<scalar_t>(weight), rows, width,
                                static_cast<float>(eps));
  });
}

at::Tensor rms_norm(at::Tensor x, at::Tensor weight, double eps) {
  check_norm_args(x, weight);
  x = x.contiguous();
  auto out = at::empty_like(x);
  const int64_t width = x.size(-1), rows = x.numel() / std::max<int64_t>(width, 1);
  for_dtype(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    kernels::rms_norm(data<scalar_t>(x), data<scalar_t>(weight), data<scalar_t>(out), rows, width,
                      static_cast<float>(eps));
  });
  return out;
}

template <typename T>
kernels::RotaryHeads<T> heads_of(const at::Tensor& x) {
  return {data<T>(x), x.size(1), x.stride(0), x.stride(1)};
}

void rotary_(at::Tensor q, at::Tensor k, at::Tensor cos, at::Tensor sin, bool interleaved) {
  check_float_or_bf16(q, "q");
  for (const auto* t : {&k, &cos, &sin})
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "q, k, cos and sin must share one dtype");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.stride(2) == 1 && k.stride(2) == 1 && k.size(0) == q.size(0) &&
                  k.size(2) == q.size(2),
              "q and k must be [tokens, heads, head_dim] with contiguous heads and one head_dim");
  TORCH_CHECK(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == q.size(0) && cos.is_contiguous() &&
                  sin.is_contiguous(),
              "cos and sin must be contiguous [tokens, rotary_dim]");
  const int64_t tokens = q.size(0), rotary_dim = cos.size(1);
  TORCH_CHECK(rotary_dim % 2 == 0 && rotary_dim <= q.size(2), "rotary_dim must be even and at most head_dim, got ",
              rotary_dim);
  for_dtype(q.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    kernels::rotary(heads_of<scalar_t>(q), heads_of<scalar_t>(k), data<scalar_t>(cos), data<scalar_t>(sin), tokens,
                    rotary_dim, interleaved);
  });
}

at::Tensor silu_and_mul(at::Tensor x) {
#ifdef AUTOGLM_KERNELS_AVX512
  check_float_or_bf16(x, "x");
  TORCH_CHECK(x.dim() == 2 && x.size(1) % 2 == 0, "x must be [rows, 2 * inner]: gate and up side by side");
  x = x.contiguous();
  const int64_t rows = x.size(0), inner = x.size(1) / 2;
  auto out = at::empty({rows, inner}, x.options());
  const int64_t grain = std::max<int64_t>(256, (int64_t{1} << 16) / std::max<int64_t>(rows, 1));
  for_dtype(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    at::parallel_for(0, inner, grain, [&](int64_t begin, int64_t end) {
      kernels::silu_and_mul_columns(data<scalar_t>(x), data<scalar_t>(out), rows, inner, begin, end);
    });
  });
  return out;
#else
  not_built("silu_and_mul", "avx512f and avx512bw");
#endif
}

// ---- the native decode step ----

#ifdef AUTOGLM_KERNELS_AVX512
// The model as decode_step reads it, built once from the Python model's tensors, which it keeps alive.
class DecodeStep {
 public:
  // `layers`: one dict per layer: "qkv", "o", "gate_up", "down" each (kind, weight, scales, bias, bits, group);
  // the norms and caches by name (None where absent). `sizes`: the model's dimensions and constants.
  DecodeStep(at::Tensor embedding, at::Tensor final_norm, const std::vector<pybind11::dict>& layers,
             const pybind11::dict& sizes) {
    check_float_or_bf16(embedding, "embedding");
    dtype_ = embedding.scalar_type();
    model_.embedding = keep(embedding, "embedding");
    model_.final_norm = keep(final_norm, "final_norm");
    model_.hidden = sizes["hidden"].cast<int64_t>();
    model_.heads = sizes["heads"].cast<int64_t>();
    model_.kv_heads = sizes["kv_heads"].cast<int64_t>();
    model_.head_dim = sizes["head_dim"].cast<int64_t>();
    model_.intermediate = sizes["intermediate"].cast<int64_t>();
    model_.rotary_dim = sizes["rotary_dim"].cast<int64_t>();
    model_.block_size = sizes["block_size"].cast<int64_t>();
    model_.interleaved_rotary = sizes["interleaved_rotary"].cast<bool>();
    model_.eps = static_cast<float>(sizes["eps"].cast<double>());
    model_.attention_scale = static_cast<float>(sizes["attention_scale"].cast<double>());
    TORCH_CHECK(embedding.dim() == 2 && embedding.size(1) == model_.hidden, "embedding must be [vocab, hidden]");
    vocab_ = embedding.size(0);
    for (const auto& layer : layers) layers_.push_back(step_layer(layer));
    model_.layers = layers_.data();
    model_.num_layers = static_cast<int64_t>(layers_.size());
  }

  // hidden [rows, hidden] for rows of one token each (see kernels::StepBatch).
  at::Tensor forward(at::Tensor tokens, at::Tensor cos, at::Tensor sin, at::Tensor slots, at::Tensor block_tables,
                     at::Tensor context_lens) {
    for (const auto* t : {&tokens, &slots, &block_tables, &context_lens})
      TORCH_CHECK(t->scalar_type() == at::kLong && t->is_contiguous(), "ids, slots, tables and lengths: contiguous int64");
    const int64_t rows = tokens.size(0);
    TORCH_CHECK(slots.size(0) == rows && context_lens.size(0) == rows && block_tables.dim() == 2 &&
                    block_tables.size(0) == rows, "one slot, block table and context length per row");
    TORCH_CHECK(cos.scalar_type() == dtype_ && sin.scalar_type() == dtype_ && cos.is_contiguous() &&
                    sin.is_contiguous() && cos.sizes() == sin.sizes() && cos.dim() == 2 && cos.size(0) == rows &&
                    cos.size(1) == model_.rotary_dim, "cos and sin must be contiguous [rows, rotary_dim] of the model's dtype");
    const int64_t max_blocks = block_tables.size(1);
    const int64_t* ids = tokens.data_ptr<int64_t>();
    const int64_t* lens = context_lens.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      TORCH_CHECK(ids[r] >= 0 && ids[r] < vocab_, "token id ", ids[r], " outside the vocabulary");
      TORCH_CHECK(lens[r] >= 1 && lens[r] <= max_blocks * model_.block_size, "context length outside the block table");
    }
    const kernels::StepBatch batch{rows, ids, cos.data_ptr(), sin.data_ptr(), slots.data_ptr<int64_t>(),
                                   block_tables.data_ptr<int64_t>(), max_blocks, lens};
    const bool bf16 = dtype_ == at::kBFloat16;
    auto workspace = at::empty({kernels::decode_step_workspace_bytes(model_, rows, bf16)}, tokens.options().dtype(at::kByte));
    auto hidden = at::empty({rows, model_.hidden}, tokens.options().dtype(dtype_));
    if (bf16) {
      kernels::decode_step(model_, batch, bf16_bits(hidden), workspace.data_ptr());
    } else {
      kernels::decode_step(model_, batch, hidden.data_ptr<float>(), workspace.data_ptr());
    }
    return hidden;
  }

 private:
  const void* keep(const at::Tensor& t, const char* name) {
    TORCH_CHECK(t.device().is_cpu() && t.is_contiguous() && t.scalar_type() == dtype_, name,
                " must be a contiguous CPU tensor of the model's dtype");
    kept_.push_back(t);
    return t.data_ptr();
  }

  const void* optional_norm(const pybind11::dict& layer, const char* name, int64_t width) {
    const auto value = layer[name];
    if (value.is_none()) return nullptr;
    const auto weight = value.cast<at::Tensor>();
    TORCH_CHECK(weight.dim() == 1 && weight.size(0) == width, name, " has the wrong width");
    return keep(weight, name);
  }

  kernels::StepLinear step_linear(const pybind11::tuple& spec, int64_t in_features, int64_t out_features) {
    const auto kind = spec[0].cast<std::string>();
    const auto weight = spec[1].cast<at::Tensor>();
    kernels::StepLinear linear{};
    linear.in_features = in_features;
    linear.out_features = out_features;
    linear.bits = spec[4].cast<int64_t>();
    linear.group = spec[5].cast<int64_t>();
    TORCH_CHECK(weight.is_contiguous() && weight.device().is_cpu(), "a projection's weight must be contiguous on the CPU");
    kept_.push_back(weight);
    linear.weight = weight.data_ptr();
    if (!spec[2].is_none()) {
      const auto scales = spec[2].cast<at::Tensor>().contiguous();
      kept_.push_back(scales);
      linear.scales = scales.data_ptr();
    }
    if (!spec[3].is_none()) {
      const auto bias = spec[3].cast<at::Tensor>().to(at::kFloat).contiguous();
      TORCH_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "bias must be [out_features]");
      kept_.push_back(bias);
      linear.bias = bias.data_ptr<float>();
    }
    const bool bf16_weight = weight.scalar_type() == at::kBFloat16 && weight.dim() == 2 &&
                             weight.size(0) == out_features && weight.size(1) == in_features;
    if (kind == "bf16-dot") {
#ifdef AUTOGLM_KERNELS_AVX512_BF16
      TORCH_CHECK(dtype_ == at::kBFloat16 && bf16_weight && in_features % 32 == 0,
                  "bf16-dot: a bfloat16 model, a bfloat16 [out, in] weight, in a multiple of 32");
      linear.kind = kernels::LinearKind::kBf16Dot;
      return linear;
#else
      not_built("the native step's bf16-dot projections", "avx512_bf16");
#endif
    }
    if (kind == "bf16-weight") {
      TORCH_CHECK(dtype_ == at::kFloat && bf16_weight && in_features % 16 == 0,
                  "bf16-weight: a float32 model, a bfloat16 [out, in] weight, in a multiple of 16");
      linear.kind = kernels::LinearKind::kBf16Weight;
      return linear;
    }
    if (kind == "int-a8") {
#ifdef AUTOGLM_KERNELS_AVX512_VNNI
      TORCH_CHECK(linear.scales != nullptr, "int-a8 projections need their scales");
      linear.kind = kernels::LinearKind::kIntA8;
      return linear;
#else
      not_built("the native step's int-a8 projections", "avx512_vnni");
#endif
    }
    TORCH_CHECK(false, "unknown projection kind '", kind, "': bf16-dot, bf16-weight or int-a8");
  }

  kernels::StepLayer step_layer(const pybind11::dict& layer) {
    const int64_t hidden = model_.hidden, dim = model_.head_dim, inner = model_.intermediate;
    const int64_t query = model_.heads * dim, kv = model_.kv_heads * dim;
    kernels::StepLayer out{};
    out.qkv = step_linear(layer["qkv"].cast<pybind11::tuple>(), hidden, query + 2 * kv);
    out.o = step_linear(layer["o"].cast<pybind11::tuple>(), query, hidden);
    out.gate_up = step_linear(layer["gate_up"].cast<pybind11::tuple>(), hidden, 2 * inner);
    out.down = step_linear(layer["down"].cast<pybind11::tuple>(), inner, hidden);
    out.input_norm = optional_norm(layer, "input_norm", hidden);
    out.post_attention_norm = optional_norm(layer, "post_attention_norm", hidden);
    TORCH_CHECK(out.input_norm != nullptr && out.post_attention_norm != nullptr, "every layer has its two norms");
    out.post_self_attn_norm = optional_norm(layer, "post_self_attn_norm", hidden);
    out.post_mlp_norm = optional_norm(layer, "post_mlp_norm", hidden);
    out.q_norm = optional_norm(layer, "q_norm", dim);
    out.k_norm = optional_norm(layer, "k_norm", dim);
    TORCH_CHECK((out.q_norm == nullptr) == (out.k_norm == nullptr), "q_norm and k_norm come together");
    for (const char* name : {"k_cache", "v_cache"}) {
      const auto cache = layer[name].cast<at::Tensor>();
      TORCH_CHECK(cache.dim() == 3 && cache.size(1) == model_.kv_heads && cache.size(2) == dim,
                  name, " must be [slots, kv_heads, head_dim]");
      void* data = const_cast<void*>(keep(cache, name));
      (std::string(name) == "k_cache" ? out.k_cache : out.v_cache) = data;
    }
    return out;
  }

  at::ScalarType dtype_;
  int64_t vocab_ = 0;
  kernels::StepModel model_{};
  std::vector<kernels::StepLayer> layers_;
  std::vector<at::Tensor> kept_;
};
#endif

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_bf16_weight_avx512", &linear_bf16_weight_avx512, "float32 x times bfloat16 weight (AVX-512)");
  m.def("linear_bf16_weight_avx2", &linear_bf16_weight_avx2, "float32 x times bfloat16 weight (AVX2 + FMA)");
  m.def("linear_bf16_dot", &linear_bf16_dot, "bfloat16 x times bfloat16 weight, float32 sums (AVX512-BF16)",
        pybind11::arg("x"), pybind11::arg("w"), pybind11::arg("bias") = pybind11::none());
  m.def("linear_int_a8", &linear_int_a8,
        "int8/int4 weights times activations quantized to int8 per row (AVX512-VNNI)", pybind11::arg("x"),
        pybind11::arg("packed"), pybind11::arg("scales"), pybind11::arg("bias"), pybind11::arg("bits"),
        pybind11::arg("group"), pybind11::arg("n_begin") = 0, pybind11::arg("n_end") = -1);
  m.def("paged_decode_attention", &paged_decode_attention, "decode attention read in place from KV blocks");
  m.def("paged_decode_attention_bf16", &paged_decode_attention_bf16,
        "decode attention read in place from bfloat16 KV blocks, float32 sums");
  m.def("paged_decode_attention_int8", &paged_decode_attention_int8,
        "decode attention read in place from int8 KV blocks and their per-slot, per-head scales");
  m.def("fused_add_rms_norm", &fused_add_rms_norm, "residual += x; x = rms_norm(residual) * weight, in place");
  m.def("rms_norm", &rms_norm, "rms_norm(x) * weight, rounded where PyTorch rounds");
  m.def("silu_and_mul", &silu_and_mul, "silu(gate) * up for gate and up side by side, rounded as PyTorch's");
#ifdef AUTOGLM_KERNELS_AVX512
  pybind11::class_<DecodeStep>(m, "DecodeStep", "a whole decoder stack's decode step as one call")
      .def(pybind11::init<at::Tensor, at::Tensor, const std::vector<pybind11::dict>&, const pybind11::dict&>())
      .def("forward", &DecodeStep::forward);
#endif
  m.def("rotary_", &rotary_, "rotary embedding of q and k in place, halves or interleaved pairs");
}
