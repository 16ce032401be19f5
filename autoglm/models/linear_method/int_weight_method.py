"""What int8/int4 weights become once loaded, and how every step multiplies by them (W8A16, W4A16).

Two methods produce them: quantizing a float checkpoint at load time, and reading a checkpoint
already quantized in the ``compressed-tensors`` format. Both end in :meth:`install`, which stores
the integer values and scales in the layout of the kernel this device and format get:

* CPU, int8, one scale per output channel: the int8 values; ``torch._weight_int8pack_mm`` for steps
  of at most :data:`INT8_FUSED_MAX_ROWS` rows, dequantize-then-matmul above (compute-bound there).
* CPU, int4, groups of 32 to 256 columns: PyTorch's int4 packing; ``torch._weight_int4pack_mm_for_cpu``
  at every row count (its layout cannot be widened back portably).
* anything else (another device, group-wise int8, other int4 group sizes): the int8 values,
  dequantized then multiplied (one byte per weight, int4 included).

The fused ops take activations in ``fused_dtype``: the checkpoint's 16-bit dtype where the engine
upcasts it to float32 on this CPU, so a bfloat16 model reads its weights as W8A16 there too.
"""
from __future__ import annotations

from enum import Enum

import torch
from torch import nn

from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.int_kernels import (
    INT4_PACK_GROUP_SIZES,
    INT8_FUSED_MAX_ROWS,
    dequantized_linear,
    int4_fused_linear,
    int8_fused_linear,
    pack_int4,
)
from autoglm.models.linear_method.int_weights import IntWeightFormat

# Parameters and buffers a method may leave on a layer; install() replaces them by its own.
_LOADED_TENSORS = ("weight", "weight_scale", "weight_packed", "weight_shape")
# The ``[out, in]`` of a layer's integer weight before packing: how many parameters it holds (int4 packs two a byte).
QUANTIZED_SHAPE = "quantized_shape"


DEQUANTIZE_PATH = "dequantize"


def remove_loaded_tensors(layer: nn.Module) -> None:
    """Drop what a method loaded into ``layer`` before its integer weights replace it (a tied LM head's
    ``weight`` is the embedding's: removing it from the head leaves the embedding's)."""
    for name in _LOADED_TENSORS:
        if hasattr(layer, name):
            delattr(layer, name)


class IntKernel(Enum):
    INT8_FUSED = "torch._weight_int8pack_mm, dequantize above a few rows"
    INT4_FUSED = "torch._weight_int4pack_mm_for_cpu"
    DEQUANTIZE = "dequantize, then matmul"


def kernel_for(weight_format: IntWeightFormat, device: torch.device, group_size: int, input_size: int) -> IntKernel:
    """The fastest measured kernel this device has for this format (see ``bench quant-kernels``)."""
    if device.type != "cpu":
        return IntKernel.DEQUANTIZE
    if weight_format.bits == 8 and group_size == input_size:
        return IntKernel.INT8_FUSED
    if weight_format.bits == 4 and group_size in INT4_PACK_GROUP_SIZES:
        return IntKernel.INT4_FUSED
    return IntKernel.DEQUANTIZE


class IntWeightLinearMethod(LinearMethodBase):
    """Multiplies by the integer weights :meth:`install` leaves on a layer; subclasses create and fill them."""

    def __init__(self, weight_format: IntWeightFormat, fused_dtype: torch.dtype | None = None) -> None:
        self.weight_format = weight_format
        self.fused_dtype = fused_dtype

    def install(self, layer: nn.Module, q: torch.Tensor, scale: torch.Tensor) -> None:
        """Replace what was loaded by ``q [out, in]`` (int8) and ``scale [out, groups]`` in this device's kernel layout."""
        remove_loaded_tensors(layer)
        group_size = q.shape[1] // scale.shape[1]
        setattr(layer, QUANTIZED_SHAPE, q.shape)
        layer.int_kernel = kernel_for(self.weight_format, q.device, group_size, q.shape[1])
        fused_scale = scale.to(self.fused_dtype or scale.dtype)
        if layer.int_kernel is IntKernel.INT4_FUSED:
            packed, scales_and_zeros = pack_int4(q, fused_scale)
            layer.register_buffer("qweight", packed)
            layer.register_buffer("weight_scale", scales_and_zeros)
        else:
            layer.register_buffer("qweight", q.contiguous())
            layer.register_buffer("weight_scale", scale.contiguous())
            if layer.int_kernel is IntKernel.INT8_FUSED:
                layer.register_buffer("channel_scale", fused_scale[:, 0].contiguous())

    def describe(self, dtype: torch.dtype) -> str:
        """E.g. ``int4 weights in groups of 128 (W4A16)``: the activations' bits are those the kernels multiply in."""
        bits = self.weight_format.bits
        groups = f" in groups of {self.weight_format.group_size}" if self.weight_format.group_size else ""
        activation_bits = torch.finfo(self.fused_dtype or dtype).bits
        return f"int{bits} weights{groups} (W{bits}A{activation_bits})"

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        """``int8-fused`` or ``int4-fused`` where PyTorch's integer-weight op runs, else ``dequantize``."""
        kernel = layer.int_kernel
        rows = x.numel() // x.shape[-1]
        if kernel is IntKernel.DEQUANTIZE or (kernel is IntKernel.INT8_FUSED and rows > INT8_FUSED_MAX_ROWS):
            return DEQUANTIZE_PATH
        return kernel.name.lower().replace("_", "-")

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.path(layer, x) == DEQUANTIZE_PATH:
            return dequantized_linear(x, layer.qweight, layer.weight_scale, bias)
        fused_x = x if self.fused_dtype is None else x.to(self.fused_dtype)
        if layer.int_kernel is IntKernel.INT8_FUSED:
            y = int8_fused_linear(fused_x, layer.qweight, layer.channel_scale)
        else:
            y = int4_fused_linear(fused_x, layer.qweight, layer.weight_scale)
        y = y.to(x.dtype)
        return y if bias is None else y + bias

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        return torch.int8 if self.weight_format.bits == 8 else torch.int4
