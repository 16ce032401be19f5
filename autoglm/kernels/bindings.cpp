// Python names of the CPU kernels.
#include "cpu_kernels.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_bf16_weight_avx512", &linear_bf16_weight_avx512, "float32 x times bfloat16 weight (AVX-512)");
  m.def("linear_bf16_weight_avx2", &linear_bf16_weight_avx2, "float32 x times bfloat16 weight (AVX2 + FMA)");
  m.def("linear_bf16_dot", &linear_bf16_dot, "bfloat16 x times bfloat16 weight, float32 sums (AVX512-BF16)",
        pybind11::arg("x"), pybind11::arg("w"), pybind11::arg("bias") = pybind11::none());
  m.def("paged_decode_attention", &paged_decode_attention, "decode attention read in place from KV blocks");
  m.def("paged_decode_attention_bf16", &paged_decode_attention_bf16,
        "decode attention read in place from bfloat16 KV blocks, float32 sums");
  m.def("paged_decode_attention_int8", &paged_decode_attention_int8,
        "decode attention read in place from int8 KV blocks and their per-slot, per-head scales");
  m.def("fused_add_rms_norm", &fused_add_rms_norm, "residual += x; x = rms_norm(residual) * weight, in place");
  m.def("rms_norm", &rms_norm, "rms_norm(x) * weight, rounded where PyTorch rounds");
  m.def("rotary_", &rotary_, "rotary embedding of q and k in place, halves or interleaved pairs");
}
