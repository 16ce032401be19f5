// Python names of the CPU kernels.
#include "cpu_kernels.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_bf16_weight", &linear_bf16_weight, "float32 x times bfloat16 weight, float32 sums");
  m.def("paged_decode_attention", &paged_decode_attention, "decode attention read in place from KV blocks");
  m.def("paged_decode_attention_int8", &paged_decode_attention_int8,
        "decode attention read in place from int8 KV blocks and their per-slot, per-head scales");
}
