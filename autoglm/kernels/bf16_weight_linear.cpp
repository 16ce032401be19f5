// Small-batch linear layers on CPUs: float32 activations times bfloat16 weights, float32 sums.
//
// At decode time a linear layer reads every weight once for a handful of rows, so its speed
// is memory bandwidth. Keeping the weights in bfloat16 halves the bytes read; widening each
// bfloat16 to float32 is exact, and the sums run in float32 as a float32 matmul's do.
// One entry point per instruction set (the tiles are in bf16_weight_tiles.h); which one runs
// is chosen in autoglm/kernels/linear_kernels.py from the CPU's flags.
#include "cpu_kernels.h"

namespace {

using Body = void (*)(const float*, const uint16_t*, float*, int64_t, int64_t, int64_t);

torch::Tensor run(torch::Tensor x, torch::Tensor w, int64_t k_multiple, Body body) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kBFloat16 && w.is_contiguous(),
              "w must be a contiguous 2-D bfloat16 tensor");
  TORCH_CHECK(w.size(1) == x.size(1) && x.size(1) % k_multiple == 0,
              "in_features must match and be a multiple of ", k_multiple);
  x = x.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, x.options());
  body(x.data_ptr<float>(), reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), y.data_ptr<float>(), M,
       K, N);
  return y;
}

}  // namespace

torch::Tensor linear_bf16_weight_avx512(torch::Tensor x, torch::Tensor w) {
  return run(x, w, 16, bf16_weight_linear_avx512);
}

torch::Tensor linear_bf16_weight_avx2(torch::Tensor x, torch::Tensor w) { return run(x, w, 8, bf16_weight_linear_avx2); }
