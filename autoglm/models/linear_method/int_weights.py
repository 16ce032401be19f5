"""Symmetric integer weights with one float scale per group of input columns, and their checks.

A weight ``W [out, in]`` becomes ``q [out, in]`` (int8 storage, values in ``[-2^(b-1), 2^(b-1) - 1]``)
and ``scale [out, in / group_size]`` with ``W ~ q * scale`` broadcast over each group. A group as
wide as the row is per-output-channel quantization. Symmetric: zero stays exactly zero, and the
rounding error of each weight is at most half its group's scale.

The scale maps a group's largest magnitude to ``(2^b - 1) / 2`` (127.5, 7.5), as the
``compressed-tensors`` package computes it: quantizing here and with that package gives the same
values, so a checkpoint it wrote and this engine's quantize-at-load run the same weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SUPPORTED_BITS = (4, 8)


class GroupSizeError(ValueError):
    """A group size that does not divide a layer's input size."""


@dataclass(frozen=True)
class IntWeightFormat:
    """How many bits each weight keeps, and how many input columns share one scale (None: the whole row)."""

    bits: int
    group_size: int | None = None

    def __post_init__(self) -> None:
        if self.bits not in SUPPORTED_BITS:
            raise ValueError(f"{self.bits}-bit weights are not supported; choose one of {SUPPORTED_BITS}")
        if self.group_size is not None and self.group_size < 1:
            raise ValueError(f"group size must be a positive integer, got {self.group_size}")

    @property
    def levels(self) -> tuple[int, int]:
        """The smallest and largest quantized value."""
        return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1

    @property
    def half_range(self) -> float:
        """What a group's largest magnitude maps to: half the span of the levels."""
        return (2**self.bits - 1) / 2

    def group_size_for(self, input_size: int) -> int:
        """This format's group size on a layer of ``input_size`` columns, refusing one that does not divide it
        (the model names the layer: see ``selection.process_weights_after_loading``)."""
        if self.group_size is None:
            return input_size
        if input_size % self.group_size:
            raise GroupSizeError(
                f"quantization group size {self.group_size} does not divide the input size {input_size}; "
                f"group sizes that do: {', '.join(map(str, dividing_group_sizes(input_size)))}"
            )
        return self.group_size


def dividing_group_sizes(input_size: int) -> list[int]:
    """Powers of two from 16 up that divide ``input_size`` (what kernels and other tools accept), else its divisors."""
    sizes = [2**power for power in range(4, input_size.bit_length()) if input_size % 2**power == 0]
    return sizes or [size for size in range(1, input_size + 1) if input_size % size == 0]


def group_absmax(weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """The largest magnitude of each group of ``weight [out, in]``: ``[out, in / group_size]``, float32."""
    out_features, in_features = weight.shape
    return weight.detach().reshape(out_features, in_features // group_size, group_size).abs().amax(dim=-1).float()


def quantize(weight: torch.Tensor, weight_format: IntWeightFormat, group_size: int,
             absmax: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` of ``weight [out, in]``, ``scale`` in the weight's dtype and ``q`` rounded against that
    stored scale, so that ``q * scale`` is the weight the matmul uses. ``absmax`` replaces the groups' own
    :func:`group_absmax` where a group is wider than this tensor (a row split over tensor-parallel ranks)."""
    out_features, in_features = weight.shape
    groups = weight.detach().reshape(out_features, in_features // group_size, group_size)
    absmax = group_absmax(weight, group_size) if absmax is None else absmax
    scale = (absmax / weight_format.half_range).to(weight.dtype)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero group stays zero
    q = torch.round(groups.float() / scale.float().unsqueeze(-1)).clamp(*weight_format.levels)
    return q.to(torch.int8).reshape(out_features, in_features), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The float weight ``q * scale`` in ``dtype``, each scale column spread over its group of input columns."""
    out_features, in_features = q.shape
    group_size = in_features // scale.shape[1]
    groups = q.reshape(out_features, scale.shape[1], group_size).to(dtype) * scale.to(dtype).unsqueeze(-1)
    return groups.reshape(out_features, in_features)
