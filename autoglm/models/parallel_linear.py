"""Megatron-style tensor-parallel projections, and the factories that pick them only where a dimension is cut.

A column-parallel projection keeps a slice of each stacked projection's output rows: its input is whole
on every rank, its output split (q/k/v by heads, gate/up by intermediate size). A row-parallel projection
keeps the matching slice of input columns and sums its partial outputs across ranks with one all-reduce
(o_proj, down_proj). Where nothing is cut (one rank), the factories return the plain layers, so a single
process runs exactly the unsharded model.
"""
from __future__ import annotations

import torch

from autoglm.distributed.parallel_state import all_reduce
from autoglm.models.linear import Linear, MergedLinear
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.shard import InputSharding, OutputSharding, Shard, shard_parameters


class ColumnParallelLinear(MergedLinear):
    """Stacked projections of which this rank computes one slice of each one's outputs."""

    def __init__(self, in_features: int, parts: dict[str, Shard], bias: bool,
                 linear_method: LinearMethodBase) -> None:
        super().__init__(in_features, {name: shard.size for name, shard in parts.items()}, bias, linear_method)
        self.output_shards = tuple(parts.values())  # what a LoRA adapter's B is cut by, as the weight is
        shard_parameters(self, OutputSharding(self.output_shards))


class RowParallelLinear(Linear):
    """This rank's slice of the input columns; the sum over ranks is the whole projection.

    The bias is added on the first rank only, so that the sum holds it once. Without ``reduce_output`` the
    partial output is left to the caller to sum, with others of its own (a sparse block's experts).
    """

    def __init__(self, inputs: Shard, out_features: int, bias: bool, linear_method: LinearMethodBase,
                 reduce_output: bool = True) -> None:
        super().__init__(inputs.size, out_features, bias, linear_method)
        shard_parameters(self, InputSharding(inputs.count, inputs.index))
        self.input_shards = inputs.count  # what a method needs to know of a scale that spans the whole row
        self.input_shard = inputs  # what a LoRA adapter's A is cut by, as the weight is
        self.adds_bias = inputs.index == 0
        self.reduce_output = reduce_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = self.linear_method.apply(self, x, self.bias if self.adds_bias else None)
        return all_reduce(partial) if self.reduce_output else partial


def stacked_linear(in_features: int, parts: dict[str, Shard], bias: bool,
                   linear_method: LinearMethodBase) -> MergedLinear:
    """Projections of the same input stacked into one, column-parallel where any of them is cut."""
    if all(shard.count == 1 for shard in parts.values()):
        return MergedLinear(in_features, {name: shard.extent for name, shard in parts.items()}, bias, linear_method)
    return ColumnParallelLinear(in_features, parts, bias, linear_method)


def output_linear(inputs: Shard, out_features: int, bias: bool, linear_method: LinearMethodBase,
                  reduce_output: bool = True) -> Linear:
    """A projection back to the hidden size, row-parallel where its input is cut (its partial sums left unsummed
    without ``reduce_output``)."""
    if inputs.count == 1:
        return Linear(inputs.extent, out_features, bias, linear_method)
    return RowParallelLinear(inputs, out_features, bias, linear_method, reduce_output)
