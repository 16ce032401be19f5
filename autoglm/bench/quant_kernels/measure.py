"""``autoglm bench quant-kernels``: each way to multiply by int8/int4 weights, per row count, on real layer shapes.

The int8/int4 linear methods pick a kernel by the number of rows a step multiplies (see
``models.linear_method.int_kernels``); this is the measurement that choice follows. Each
candidate is timed on one layer shape and row count; the float matmul the engine otherwise
runs is timed beside them. GB/s counts the weight bytes each candidate reads once per call.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autoglm.bench.lib.timing import best_seconds_per_call
from autoglm.models.linear_method.int_kernels import (
    dequantized_linear,
    int4_fused_linear,
    int8_fused_linear,
    pack_int4,
)
from autoglm.models.linear_method.int_weights import IntWeightFormat, quantize

# qwen2.5-0.5b's projections, as [out, in]: q/o, k/v, gate/up, down, the tied LM head.
QWEN_05B_LAYER_SHAPES = ((896, 896), (128, 896), (4864, 896), (896, 4864), (151936, 896))
ROW_COUNTS = (1, 4, 16, 64, 512)
INT4_GROUP_SIZE = 128


@dataclass(frozen=True)
class KernelTiming:
    kernel: str
    out_features: int
    in_features: int
    rows: int
    seconds: float
    weight_bytes: int

    @property
    def weight_gb_per_s(self) -> float:
        return self.weight_bytes / self.seconds / 1e9


def candidates(weight: torch.Tensor) -> dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], int]]:
    """Each kernel as a function of the activations, with the weight bytes it reads."""
    q8, scale8 = quantize(weight, IntWeightFormat(bits=8), weight.shape[1])
    int4_format = IntWeightFormat(bits=4, group_size=INT4_GROUP_SIZE)
    q4, scale4 = quantize(weight, int4_format, INT4_GROUP_SIZE)
    packed4, scales_and_zeros4 = pack_int4(q4, scale4)
    channel_scale8 = scale8[:, 0].contiguous()
    scales_bytes8, scales_bytes4 = scale8.nbytes, scales_and_zeros4.nbytes
    return {
        f"{weight.dtype} F.linear": (lambda x: F.linear(x, weight), weight.nbytes),
        "int8 _weight_int8pack_mm": (lambda x: int8_fused_linear(x, q8, channel_scale8), q8.nbytes + scales_bytes8),
        "int8 dequantize + F.linear": (lambda x: dequantized_linear(x, q8, scale8), q8.nbytes + scales_bytes8),
        "int4 _weight_int4pack_mm_for_cpu": (lambda x: int4_fused_linear(x, packed4, scales_and_zeros4),
                                             packed4.nbytes + scales_bytes4),
        # The portable path keeps each int4 value in a byte of its own.
        "int4 dequantize + F.linear": (lambda x: dequantized_linear(x, q4, scale4), q4.nbytes + scale4.nbytes),
    }


def measure(shapes: tuple[tuple[int, int], ...], row_counts: tuple[int, ...], dtype: torch.dtype,
            repeats: int, min_round_s: float) -> list[KernelTiming]:
    device = torch.device("cpu")
    timings = []
    for out_features, in_features in shapes:
        weight = torch.randn(out_features, in_features, dtype=dtype) / in_features**0.5
        for kernel, (run, weight_bytes) in candidates(weight).items():
            for rows in row_counts:
                x = torch.randn(rows, in_features, dtype=dtype)
                seconds = best_seconds_per_call(lambda: run(x), device, repeats, min_round_s)
                timings.append(KernelTiming(kernel, out_features, in_features, rows, seconds, weight_bytes))
    return timings
