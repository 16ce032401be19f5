"""Experts of a checkpoint already quantized in the ``compressed-tensors`` format (see ``quantization_config``).

The package writes each expert's projection as it writes a linear layer, under the expert's own names:
``mlp.experts.3.gate_proj.weight`` (int8) or ``.weight_packed`` with ``.weight_shape`` (int4 packed eight to an
int32), and ``.weight_scale``. Each loads into its expert's rows of a stacked parameter; once loaded the values
are unpacked with the package's own helper and installed as they are stored: nothing is requantized.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.expert_method.int_weight_experts import DOWN, GATE_UP, IntWeightExpertMethod
from autoglm.models.linear_method.compressed_tensors import int4_unpacker
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.parameters import WeightShapeError, checkpoint_parameter, stacked_experts_parameter

_INT32_BITS = 32


@dataclass(frozen=True)
class ExpertWeightShapeLoader:
    """Checks each expert's ``weight_shape`` (the unpacked ``[out, in]`` of one packed projection) against the
    layer's, shard ``expert * len(part_shapes) + part`` as ``StackedExpertsWeightLoader`` numbers them."""

    part_shapes: tuple[tuple[int, int], ...]

    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
        if shard_id is None:
            raise ValueError("a packed expert's weight_shape loads one expert's projection at a time; "
                             "give the per-expert shard")
        expert, part = divmod(shard_id, len(self.part_shapes))
        if tuple(loaded_weight.tolist()) != self.part_shapes[part]:
            raise WeightShapeError(tuple(loaded_weight.tolist()), self.part_shapes[part])
        with torch.no_grad():
            param.data[expert, part].copy_(loaded_weight)


@dataclass(frozen=True)
class _Projection:
    """One stacked projection: its buffers' prefix, the checkpoint names of its parts, and their sizes."""

    prefix: str
    parts: tuple[str, ...]
    out_features: int  # of each part
    in_features: int


class CompressedTensorsExpertMethod(IntWeightExpertMethod):
    """Reads ``int-quantized`` (``packed=False``) or ``pack-quantized`` (``packed=True``) experts."""

    def __init__(self, weight_format: IntWeightFormat, packed: bool, fused_dtype: torch.dtype | None = None) -> None:
        super().__init__(weight_format, fused_dtype)
        self.packed = packed

    def create_weights(self, layer: nn.Module, num_experts: int, hidden_size: int, intermediate_size: int,
                       params_dtype: torch.dtype) -> None:
        layer.expert_in_features = {GATE_UP: hidden_size, DOWN: intermediate_size}  # what packed words unpack to
        for projection in (_Projection(GATE_UP, ("gate_proj", "up_proj"), intermediate_size, hidden_size),
                           _Projection(DOWN, ("down_proj",), hidden_size, intermediate_size)):
            self._create_projection(layer, num_experts, projection, params_dtype)

    def _create_projection(self, layer: nn.Module, num_experts: int, projection: _Projection,
                           params_dtype: torch.dtype) -> None:
        def parts(suffix: str) -> dict[str, int]:
            return {f"{part}.{suffix}": projection.out_features for part in projection.parts}

        columns = projection.in_features
        groups = columns // self.weight_format.group_size_for(columns)
        if self.packed:
            words = -(-columns * self.weight_format.bits // _INT32_BITS)
            layer.register_parameter(f"{projection.prefix}_weight_packed", stacked_experts_parameter(
                num_experts, parts("weight_packed"), words, dtype=torch.int32))
            shape = (projection.out_features, columns)
            weight_shape = checkpoint_parameter(num_experts, len(projection.parts), 2, dtype=torch.int64,
                                                weight_loader=ExpertWeightShapeLoader((shape,) * len(projection.parts)))
            weight_shape.expert_checkpoint_names = tuple(parts("weight_shape"))
            layer.register_parameter(f"{projection.prefix}_weight_shape", weight_shape)
        else:
            layer.register_parameter(f"{projection.prefix}_weight", stacked_experts_parameter(
                num_experts, parts("weight"), columns, dtype=torch.int8))
        layer.register_parameter(f"{projection.prefix}_weight_scale", stacked_experts_parameter(
            num_experts, parts("weight_scale"), groups, dtype=params_dtype))

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        self.install(layer, {name: (self._values(layer, name), getattr(layer, f"{name}_weight_scale").detach())
                             for name in (GATE_UP, DOWN)})

    def _values(self, layer: nn.Module, name: str) -> torch.Tensor:
        """The stored int8 values ``[experts, out, in]``, unpacked from their int32 words where packed."""
        if not self.packed:
            return getattr(layer, f"{name}_weight").detach()
        packed = getattr(layer, f"{name}_weight_packed").detach()
        experts, rows, words = packed.shape
        shape = torch.Size((experts * rows, layer.expert_in_features[name]))
        q = int4_unpacker()(packed.reshape(experts * rows, words), self.weight_format.bits, shape)
        return q.reshape(experts, rows, -1)
