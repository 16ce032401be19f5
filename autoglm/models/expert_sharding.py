"""Which part of a checkpoint's expert tensors a rank keeps, and the weight loader wrapper that cuts it.

Holding a share of the experts (expert parallelism), a layer keeps its own experts' rows of the stack: the
per-expert tensors of the others never reach it (``FusedExperts.checkpoint_names_elsewhere``), and a tensor of
every expert stacked (transformers 5's fused names) is cut to this rank's experts. Holding a slice of every expert
(tensor parallelism without it), each expert's gate and up keep this rank's rows of the intermediate size and its
down this rank's columns, as a dense MLP's column- and row-parallel projections do. Only the checkpoint names
decide which is which (``down_proj.*`` is cut by columns), so any expert method whose parameters keep the
checkpoint's rows and columns per expert is cut the same way; a down tensor exactly as wide as the parameter (one
scale per output row) loads whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.fused_experts import FusedExperts
from autoglm.models.shard import Shard, ShardedWeightLoader

_COLUMN_CUT = "down_proj."  # the projection back to the hidden size: its input columns are the intermediate size


@dataclass(frozen=True)
class ExpertSharding:
    """This rank's experts (``local_experts``, by model id) and its slice of each one's intermediate size."""

    local_experts: tuple[int, ...]
    intermediate: Shard

    def take(self, param: nn.Parameter, loaded: torch.Tensor, shard_id: int | None) -> torch.Tensor:
        """This rank's part of ``loaded``: one expert's projection (``shard_id`` as ``StackedExpertsWeightLoader``
        reads it), or every expert's projections stacked (``shard_id`` None)."""
        names = param.expert_checkpoint_names
        if shard_id is not None:
            return self._cut(names[shard_id % len(names)], param, loaded, 0)
        if loaded.shape[0] > len(self.local_experts):
            loaded = loaded.index_select(0, torch.tensor(self.local_experts, device=loaded.device))
        if names[0].startswith(_COLUMN_CUT) or self.intermediate.count == 1:
            return self._cut(names[0], param, loaded, 1)
        parts = loaded.chunk(len(names), dim=1)
        return torch.cat([self._cut(name, param, part, 1) for name, part in zip(names, parts)], dim=1)

    def _cut(self, name: str, param: nn.Parameter, tensor: torch.Tensor, first_dim: int) -> torch.Tensor:
        """Projection ``name``'s slice of ``tensor``, whose dims from ``first_dim`` are one expert's rows and
        columns."""
        count, index = self.intermediate.count, self.intermediate.index
        if count == 1:
            return tensor
        if not name.startswith(_COLUMN_CUT):
            return Shard.split(tensor.shape[first_dim], count, index).take(tensor, first_dim)
        dim = first_dim + 1
        if tensor.dim() <= dim or tensor.shape[dim] == param.shape[2]:
            return tensor
        width = param.shape[2]
        return Shard(width * count, count, index, width).take(tensor, dim)


def shard_experts(layer: FusedExperts, intermediate: Shard) -> None:
    """Make every weight of ``layer`` load only this rank's part: its placement's experts, ``intermediate``'s rows
    of each (nothing to do where the layer holds all of every expert)."""
    if len(layer.placement.local_experts) == layer.num_experts and intermediate.count == 1:
        return
    sharding = ExpertSharding(layer.placement.local_experts, intermediate)
    for parameter in layer.parameters(recurse=False):
        parameter.weight_loader = ShardedWeightLoader(parameter.weight_loader, sharding)
