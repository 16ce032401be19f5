"""Projections whose weights a linear method creates and multiplies by (see ``linear_method``).

The modules know their shape, bias and checkpoint names; how the weight is stored (float32,
a bfloat16 copy for a CPU kernel, later int8/int4 or a tensor-parallel shard) is their method's.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.parameters import stacked_rows_parameter


class Linear(nn.Module):
    """``y = x W^T + b``, ``W`` ``[out_features, in_features]`` as in a checkpoint.

    ``output_sizes`` are given where ``W``'s rows stack several checkpoint projections
    (see :class:`MergedLinear`); they sum to ``out_features``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool, linear_method: LinearMethodBase,
                 *, output_sizes: Sequence[int] = ()) -> None:
        super().__init__()
        sizes = tuple(output_sizes) or (out_features,)
        if sum(sizes) != out_features:
            raise ValueError(f"output_sizes {sizes} sum to {sum(sizes)}, not out_features {out_features}")
        self.in_features = in_features  # this rank's, as the output sizes are
        self.out_features = out_features
        self.linear_method = linear_method
        linear_method.create_weights(self, in_features, sizes, torch.get_default_dtype())
        self.bias = stacked_rows_parameter(sizes) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_method.apply(self, x, self.bias)


class MergedLinear(Linear):
    """Several projections of the same input run as one matmul.

    ``parts`` names each checkpoint projection (e.g. ``q_proj``) and its output size, in the
    order their rows are stacked; a checkpoint tensor of part ``i`` loads as shard ``i``.
    """

    def __init__(self, in_features: int, parts: dict[str, int], bias: bool,
                 linear_method: LinearMethodBase) -> None:
        super().__init__(in_features, sum(parts.values()), bias, linear_method, output_sizes=tuple(parts.values()))
        self.part_names = tuple(parts)
        self.part_sizes = list(parts.values())


class LMHead(nn.Module):
    """Hidden states to vocabulary logits through its own linear method, chosen apart from the layers'.

    Tied to the input embedding it multiplies by the embedding's ``weight`` (loaded as the
    embedding); its method still post-processes it, e.g. into a bfloat16 copy of its own.
    Not a :class:`Linear`: profiling times the head around ``compute_logits`` instead.
    """

    def __init__(self, hidden_size: int, vocab_size: int, linear_method: LinearMethodBase,
                 tied_weight: nn.Parameter | None = None) -> None:
        super().__init__()
        self.linear_method = linear_method
        self.tied = tied_weight is not None  # its weight counts as the embedding's, even once quantized apart
        if tied_weight is None:
            linear_method.create_weights(self, hidden_size, (vocab_size,), torch.get_default_dtype())
        else:
            self.weight = tied_weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear_method.apply(self, hidden)
