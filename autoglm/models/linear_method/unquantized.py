"""Weights kept as the checkpoint gives them, in the model's dtype."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.parameters import stacked_rows_parameter


class UnquantizedLinearMethod(LinearMethodBase):
    """One ``weight`` ``[out, in]`` as in the checkpoint, multiplied by ``F.linear``."""

    def create_weights(self, layer: nn.Module, input_size: int, output_sizes: Sequence[int],
                       params_dtype: torch.dtype) -> None:
        layer.register_parameter("weight", stacked_rows_parameter(output_sizes, input_size, dtype=params_dtype))

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.linear(x, layer.weight, bias)
