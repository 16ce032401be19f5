"""Projections of a checkpoint already quantized in the ``compressed-tensors`` format (see ``quantization_config``).

The checkpoint's tensors load as they are stored (int8 ``weight``, or int32 ``weight_packed`` with
its ``weight_shape``, and ``weight_scale``), each fused projection one shard at a time; once
loaded they are unpacked with the ``compressed-tensors`` package's own helper and installed like
weights quantized at load time. Nothing is requantized: the engine multiplies by the stored values.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import nn

from autoglm.models.linear_method.int_weight_method import IntWeightLinearMethod
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.parameters import WeightShapeError, checkpoint_parameter, stacked_rows_parameter
from autoglm.models.shard import DESCRIBES_SHAPE

_INT32_BITS = 32


@dataclass(frozen=True)
class WeightShapeLoader:
    """Checks each ``weight_shape`` tensor (the unpacked ``[out, in]`` of a packed shard) against the layer's."""

    shard_shapes: tuple[tuple[int, int], ...]

    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
        expected = self.shard_shapes[0 if shard_id is None else shard_id]
        if shard_id is None and len(self.shard_shapes) > 1:
            expected = (sum(rows for rows, _ in self.shard_shapes), expected[1])
        if tuple(loaded_weight.tolist()) != expected:
            raise WeightShapeError(tuple(loaded_weight.tolist()), expected)


class CompressedTensorsLinearMethod(IntWeightLinearMethod):
    """Reads ``int-quantized`` (``packed=False``) or ``pack-quantized`` (``packed=True``) projections."""

    def __init__(self, weight_format: IntWeightFormat, packed: bool, fused_dtype: torch.dtype | None = None) -> None:
        super().__init__(weight_format, fused_dtype)
        self.packed = packed

    def create_weights(self, layer: nn.Module, input_size: int, output_sizes: Sequence[int],
                       params_dtype: torch.dtype) -> None:
        groups = input_size // self.weight_format.group_size_for(input_size)
        layer.input_size = input_size  # what the packed int32 words unpack to
        if self.packed:
            words = -(-input_size * self.weight_format.bits // _INT32_BITS)
            layer.register_parameter("weight_packed", stacked_rows_parameter(output_sizes, words, dtype=torch.int32))
            shapes = tuple((rows, input_size) for rows in output_sizes)
            weight_shape = checkpoint_parameter(2, dtype=torch.int64, weight_loader=WeightShapeLoader(shapes))
            setattr(weight_shape, DESCRIBES_SHAPE, True)  # a shard's shape, not its values, under tensor parallelism
            layer.register_parameter("weight_shape", weight_shape)
        else:
            layer.register_parameter("weight", stacked_rows_parameter(output_sizes, input_size, dtype=torch.int8))
        layer.register_parameter("weight_scale", stacked_rows_parameter(output_sizes, groups, dtype=params_dtype))

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        scale = layer.weight_scale.detach()
        if self.packed:
            unpack_from_int32 = int4_unpacker()
            packed = layer.weight_packed.detach()
            q = unpack_from_int32(packed, self.weight_format.bits, torch.Size((packed.shape[0], layer.input_size)))
        else:
            q = layer.weight.detach()
        self.install(layer, q, scale)

    def describe(self, dtype: torch.dtype) -> str:
        return f"{super().describe(dtype)}, as the checkpoint stores them"



def compressed_tensors_module(name: str, purpose: str) -> ModuleType:
    """A module of the compressed-tensors package, an optional extra; a ValueError saying how to install it
    where it is missing (the command line reports ValueErrors as one line)."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ValueError(f"{purpose} needs the compressed-tensors package: pip install 'open-autoglm[quant]'") \
            from error


def int4_unpacker():
    """The package's own int4 unpacking, so its layout is never re-implemented here."""
    helpers = compressed_tensors_module("compressed_tensors.compressors.pack_quantized.helpers",
                                        "loading a pack-quantized (int4) compressed-tensors checkpoint")
    return helpers.unpack_from_int32
