"""int8/int4 weights times int8 activations (W8A8, W4A8: the ``quantization`` values ``w8a8`` and ``w4a8``).

A float checkpoint's projections are quantized as they load, as ``int8``/``int4`` do, and stored in the
layout of the AVX512-VNNI kernel (``int_activation_weights``); every step also quantizes its activations,
per token, to int8. The integer products are what lets a decode step stream its weights at memory
bandwidth, and the activations' rounding is why these are values of their own: their accuracy is not
``int8``/``int4``'s (docs/QUANTIZATION.md). Where the kernel does not run (a CPU without AVX512-VNNI, a
width it does not take, before the compiled kernels are in use) PyTorch computes the same math.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.kernels.int_a8_kernel import INT_A8_KERNEL, int_a8_linear, int_a8_missing_flags
from autoglm.models.linear_method.base import NativeLinear
from autoglm.models.linear_method.int_activation_weights import (
    int_a8_reference_linear,
    kernel_takes,
    pack_int_a8,
    unpack_int_a8,
)
from autoglm.models.linear_method.int_weight_method import DEQUANTIZE_PATH, QUANTIZED_SHAPE, remove_loaded_tensors
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod

_KERNEL_DTYPES = (torch.float32, torch.bfloat16)


class Int8ActivationLinearMethod(QuantizeAtLoadLinearMethod):
    """Leaves on each layer ``qweight`` and ``weight_scale`` in the kernel's layout, ``int_a8_group`` (its group
    size), ``int_a8_bias`` (its bias in float32, or None) and ``int_a8_kernel`` (whether the kernel takes it here)."""

    def install(self, layer: nn.Module, q: torch.Tensor, scale: torch.Tensor) -> None:
        remove_loaded_tensors(layer)
        out_features, in_features = q.shape
        setattr(layer, QUANTIZED_SHAPE, q.shape)
        layer.int_a8_group = in_features // scale.shape[1]
        packed, scales = pack_int_a8(q, scale, self.weight_format.bits)
        layer.register_buffer("qweight", packed)
        layer.register_buffer("weight_scale", scales)
        bias = getattr(layer, "bias", None)
        layer.int_a8_bias = None if bias is None else bias.detach().float()
        layer.int_a8_kernel = (q.device.type == "cpu" and kernel_takes(in_features, layer.int_a8_group)
                               and not int_a8_missing_flags())

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        """The kernel's name where it takes this layer and input, else ``dequantize`` (PyTorch's same math)."""
        return INT_A8_KERNEL if layer.int_a8_kernel and x.dtype in _KERNEL_DTYPES else DEQUANTIZE_PATH

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        bits = self.weight_format.bits
        if self.path(layer, x) == INT_A8_KERNEL:
            rows = x.reshape(-1, x.shape[-1])
            y = int_a8_linear(rows, layer.qweight, layer.weight_scale, bias, bits, layer.int_a8_group)
            if y is not None:
                return y.reshape(*x.shape[:-1], y.shape[-1])
        q = unpack_int_a8(layer.qweight, bits, getattr(layer, QUANTIZED_SHAPE)[0])
        return int_a8_reference_linear(x, q, layer.weight_scale, bias)

    def describe(self, dtype: torch.dtype) -> str:
        """E.g. ``int4 weights in groups of 32, int8 activations per token (W4A8), quantized as they load``."""
        bits = self.weight_format.bits
        groups = f" in groups of {self.weight_format.group_size}" if self.weight_format.group_size else ""
        return f"int{bits} weights{groups}, int8 activations per token (W{bits}A8), quantized as they load"

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        return torch.int8 if self.weight_format.bits == 8 else torch.int4

    def native_linear(self, layer: nn.Module) -> NativeLinear | None:
        if not layer.int_a8_kernel:
            return None
        return NativeLinear("int-a8", layer.qweight, layer.weight_scale, layer.int_a8_bias, self.weight_format.bits,
                            layer.int_a8_group)
