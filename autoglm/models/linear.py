"""Projections whose weights come only from a checkpoint.

Parameters are allocated uninitialised and without gradients: ``load_weights`` fills every
one of them (it fails otherwise), so a random init would only cost time on a large model.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.kernels.cpu_linear import linear


def checkpoint_parameter(*shape: int) -> nn.Parameter:
    """An uninitialised inference-only parameter on the current default device and dtype."""
    return nn.Parameter(torch.empty(*shape), requires_grad=False)


class Linear(nn.Module):
    """``y = x W^T + b`` with ``weight`` ``[out_features, in_features]`` as in a checkpoint."""

    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.weight = checkpoint_parameter(out_features, in_features)
        self.bias = checkpoint_parameter(out_features) if bias else None
        self.weight_bf16: torch.Tensor | None = None  # see autoglm.kernels.cpu_linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.weight_bf16)


class MergedLinear(Linear):
    """Several projections of the same input run as one matmul.

    ``parts`` names each checkpoint projection (e.g. ``q_proj``) and its output size, in
    the order their rows are stacked; the loader copies each into its slice of rows.
    """

    def __init__(self, in_features: int, parts: dict[str, int], bias: bool) -> None:
        super().__init__(in_features, sum(parts.values()), bias)
        self.part_rows: dict[str, slice] = {}
        start = 0
        for name, size in parts.items():
            self.part_rows[name] = slice(start, start + size)
            start += size
        self.part_sizes = list(parts.values())
