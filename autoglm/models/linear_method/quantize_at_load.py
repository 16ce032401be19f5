"""int8/int4 weights quantized from a float checkpoint as it loads (the ``quantization`` setting).

The float weight loads as an unquantized one would, then :meth:`process_weights_after_loading`
quantizes it and drops it, one layer at a time: the float model exists whole once, while loading.
Under tensor parallelism a row-parallel layer holds a slice of each row's columns: its one scale per row
is taken from the whole row's largest magnitude across ranks, so every rank quantizes as one process would.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from autoglm.models.linear_method.int_weight_method import IntWeightLinearMethod
from autoglm.distributed.parallel_state import all_reduce_max
from autoglm.models.linear_method.int_weights import group_absmax, quantize
from autoglm.models.parameters import stacked_rows_parameter


class QuantizeAtLoadLinearMethod(IntWeightLinearMethod):
    """Loads ``weight [out, in]`` in the model's dtype; quantizes it once loaded."""

    def create_weights(self, layer: nn.Module, input_size: int, output_sizes: Sequence[int],
                       params_dtype: torch.dtype) -> None:
        layer.register_parameter("weight", stacked_rows_parameter(output_sizes, input_size, dtype=params_dtype))

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        weight = layer.weight
        group_size = self.weight_format.group_size_for(weight.shape[1])
        absmax = None
        if self.weight_format.group_size is None and getattr(layer, "input_shards", 1) > 1:
            absmax = all_reduce_max(group_absmax(weight, group_size))
        self.install(layer, *quantize(weight, self.weight_format, group_size, absmax))

    def describe(self, dtype: torch.dtype) -> str:
        return f"{super().describe(dtype)}, quantized as they load"
