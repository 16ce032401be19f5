"""Parameters filled only from a checkpoint, and the per-parameter loaders that fill them.

Every parameter carries a ``weight_loader(param, loaded_weight, shard_id=None)``: the one place
that knows how a checkpoint tensor lands in it. A plain parameter takes the whole tensor; one
whose rows stack several checkpoint projections (fused q/k/v, gate/up) also takes each of them
alone, by its index. Tensor-parallel slicing and quantized packing plug in as other loaders.

Parameters are allocated uninitialised and without gradients: loading fills every one of
them (it fails otherwise), so a random init would only cost time on a large model.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn


class WeightLoader(Protocol):
    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None: ...


class WeightShapeError(ValueError):
    """A checkpoint tensor whose shape does not fit the parameter (or shard) it is loaded into."""

    def __init__(self, loaded_shape: tuple[int, ...], expected_shape: tuple[int, ...]) -> None:
        super().__init__(f"a tensor of shape {loaded_shape} cannot load into one of shape {expected_shape}")
        self.loaded_shape = loaded_shape
        self.expected_shape = expected_shape


def _copy_checked(target: torch.Tensor, loaded_weight: torch.Tensor) -> None:
    """Copy (and cast) ``loaded_weight`` into ``target``, refusing a shape that differs."""
    if loaded_weight.shape != target.shape:
        raise WeightShapeError(tuple(loaded_weight.shape), tuple(target.shape))
    with torch.no_grad():
        target.copy_(loaded_weight)


def default_weight_loader(param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
    """The whole tensor into the whole parameter; a plain parameter has no shards."""
    if shard_id is not None:
        raise ValueError(f"shard {shard_id} given for a parameter of one unsharded tensor; give shard_id=None")
    _copy_checked(param.data, loaded_weight)


@dataclass(frozen=True)
class StackedRowsWeightLoader:
    """For a parameter whose rows stack projections of these sizes: the whole tensor (a checkpoint
    that stores them fused), or shard ``i`` into the rows of projection ``i``."""

    shard_sizes: tuple[int, ...]

    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
        if shard_id is None:
            _copy_checked(param.data, loaded_weight)
            return
        _copy_stacked_part(param.data, loaded_weight, self.shard_sizes, shard_id)


@dataclass(frozen=True)
class StackedExpertsWeightLoader:
    """For a parameter ``[experts, rows, ...]`` whose rows stack each expert's projections of these sizes: the
    whole stack (a checkpoint that stores the experts fused), or shard ``expert * len(part_sizes) + part``
    into that expert's rows of that projection (one of the checkpoint's per-expert tensors)."""

    part_sizes: tuple[int, ...]

    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
        if shard_id is None:
            _copy_checked(param.data, loaded_weight)
            return
        expert, part = divmod(shard_id, len(self.part_sizes))
        if not 0 <= expert < param.shape[0]:
            raise ValueError(f"shard {shard_id} names expert {expert}; this parameter stacks experts 0 to "
                             f"{param.shape[0] - 1}")
        _copy_stacked_part(param.data[expert], loaded_weight, self.part_sizes, part)


def _copy_stacked_part(target: torch.Tensor, loaded_weight: torch.Tensor, sizes: tuple[int, ...], part: int) -> None:
    """Copy ``loaded_weight`` into the rows of ``target`` that stacked projection ``part`` of ``sizes`` holds."""
    if not 0 <= part < len(sizes):
        raise ValueError(f"shard {part} does not exist; this parameter stacks shards 0 to {len(sizes) - 1}")
    _copy_checked(target.narrow(0, sum(sizes[:part]), sizes[part]), loaded_weight)


def checkpoint_parameter(*shape: int, dtype: torch.dtype | None = None,
                         weight_loader: WeightLoader = default_weight_loader) -> nn.Parameter:
    """An uninitialised inference-only parameter on the current default device (and ``dtype``,
    else the default dtype), filled later by ``weight_loader``."""
    parameter = nn.Parameter(torch.empty(*shape, dtype=dtype), requires_grad=False)
    parameter.weight_loader = weight_loader
    return parameter


def stacked_rows_parameter(output_sizes: Sequence[int], *trailing: int,
                           dtype: torch.dtype | None = None) -> nn.Parameter:
    """A parameter ``[sum(output_sizes), *trailing]`` that loads whole or one stacked projection at a time."""
    sizes = tuple(output_sizes)
    return checkpoint_parameter(sum(sizes), *trailing, dtype=dtype, weight_loader=StackedRowsWeightLoader(sizes))


def stacked_experts_parameter(num_experts: int, parts: dict[str, int], columns: int,
                              dtype: torch.dtype | None = None) -> nn.Parameter:
    """A parameter ``[num_experts, sum(parts), columns]``: each expert's projections stacked on its rows, loaded
    whole or one expert's projection at a time. ``parts`` maps the per-expert checkpoint name of each projection
    (e.g. ``gate_proj.weight``) to its rows, in stacking order, kept as ``expert_checkpoint_names`` for the
    checkpoint loader to route each expert's tensors by."""
    sizes = tuple(parts.values())
    parameter = checkpoint_parameter(num_experts, sum(sizes), columns, dtype=dtype,
                                     weight_loader=StackedExpertsWeightLoader(sizes))
    parameter.expert_checkpoint_names = tuple(parts)
    return parameter
