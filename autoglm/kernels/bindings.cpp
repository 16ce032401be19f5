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
#include <torch/csrc/utils/pybind.h>

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
  m.def("rotary_", &rotary_, "rotary embedding of q and k in place, halves or interleaved pairs");
}
