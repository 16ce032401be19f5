"""Which slice of a checkpoint tensor a tensor-parallel rank keeps, and the weight loaders that cut it.

Sharded layers wrap each parameter's own ``weight_loader`` (see ``parameters``) in a
:class:`ShardedWeightLoader`: it narrows the whole checkpoint tensor to this rank's slice, then hands
the slice to the wrapped loader, which knows nothing of ranks. A column-parallel layer keeps rows (its
outputs, one slice per stacked projection); a row-parallel layer keeps columns (its inputs).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.parameters import WeightLoader, WeightShapeError

# Set on a parameter whose checkpoint tensor holds a projection's unpacked [rows, columns], not its values.
DESCRIBES_SHAPE = "describes_shape"


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` of ``count`` slices of ``size`` entries along one dim of ``extent`` entries.

    ``count * size`` may pass ``extent`` by less than one slice (a vocabulary that does not divide):
    the last slice is short, and padded with zeros to ``size``.
    """

    extent: int
    count: int
    index: int
    size: int

    @classmethod
    def split(cls, extent: int, count: int, index: int) -> Shard:
        """Slice ``index`` of ``extent`` entries cut into ``count`` (the last ones short where it does not divide)."""
        return cls(extent, count, index, -(-extent // count))

    @property
    def start(self) -> int:
        return self.index * self.size

    def take(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        """This slice of ``tensor`` along ``dim``, zero-padded to ``size``; refuses a tensor of another extent."""
        if tensor.shape[dim] != self.extent:
            expected = (*tensor.shape[:dim], self.extent, *tensor.shape[dim + 1:])
            raise WeightShapeError(tuple(tensor.shape), expected)
        available = max(0, min(self.size, self.extent - self.start))
        piece = tensor.narrow(dim, min(self.start, self.extent), available)
        if available == self.size:
            return piece
        padding = list(tensor.shape)
        padding[dim] = self.size - available
        return torch.cat((piece, tensor.new_zeros(padding)), dim=dim)


@dataclass(frozen=True)
class OutputSharding:
    """A column-parallel layer's output rows: one :class:`Shard` per projection its rows stack."""

    parts: tuple[Shard, ...]

    def take(self, param: nn.Parameter, loaded: torch.Tensor, shard_id: int | None) -> torch.Tensor:
        parts = self.parts if shard_id is None else (self.parts[shard_id],)
        if getattr(param, DESCRIBES_SHAPE, False):
            return torch.tensor([sum(part.size for part in parts), int(loaded[1])])
        if len(parts) == 1:
            return parts[0].take(loaded, 0)
        extents = [part.extent for part in parts]  # a checkpoint that stores the projections fused
        if loaded.shape[0] != sum(extents):
            raise WeightShapeError(tuple(loaded.shape), (sum(extents), *loaded.shape[1:]))
        return torch.cat([part.take(piece, 0) for part, piece in zip(parts, loaded.split(extents))])


@dataclass(frozen=True)
class InputSharding:
    """A row-parallel layer's input columns: slice ``index`` of ``count`` equal slices.

    Each parameter's second dim follows the input (columns, packed int32 words, scale groups), so a
    tensor ``count`` times as wide as the parameter is cut; one exactly as wide (a bias, or one scale
    per output row) is the same on every rank and loads whole.
    """

    count: int
    index: int

    def take(self, param: nn.Parameter, loaded: torch.Tensor, shard_id: int | None) -> torch.Tensor:
        if getattr(param, DESCRIBES_SHAPE, False):
            return torch.tensor([int(loaded[0]), int(loaded[1]) // self.count])
        if loaded.dim() < 2 or loaded.shape[1] == param.shape[1]:
            return loaded
        width = param.shape[1]
        return Shard(width * self.count, self.count, self.index, width).take(loaded, 1)


@dataclass(frozen=True)
class ShardedWeightLoader:
    """Cuts this rank's slice out of a whole checkpoint tensor, then loads it with ``inner``."""

    inner: WeightLoader
    sharding: OutputSharding | InputSharding

    def __call__(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int | None = None) -> None:
        self.inner(param, self.sharding.take(param, loaded_weight, shard_id), shard_id)


def shard_parameters(module: nn.Module, sharding: OutputSharding | InputSharding) -> None:
    """Make every parameter ``module`` itself registers load only this rank's slice."""
    for parameter in module.parameters(recurse=False):
        parameter.weight_loader = ShardedWeightLoader(parameter.weight_loader, sharding)
