"""int8/int4 experts quantized from a float checkpoint as it loads (the ``quantization`` setting).

The experts load in the model's dtype as the unquantized method's do, then each expert's projections are
quantized like a linear layer's (``int_weights.quantize``: the same scales, the same values) and the float
stack is dropped, one layer at a time.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.models.expert_method.int_weight_experts import DOWN, GATE_UP, IntWeightExpertMethod
from autoglm.models.expert_method.unquantized import UnquantizedExpertMethod
from autoglm.models.linear_method.int_weights import quantize


class QuantizeAtLoadExpertMethod(IntWeightExpertMethod):
    """Loads the unquantized method's ``gate_up_proj`` and ``down_proj``; quantizes them once loaded."""

    def create_weights(self, layer: nn.Module, num_experts: int, hidden_size: int, intermediate_size: int,
                       params_dtype: torch.dtype) -> None:
        UnquantizedExpertMethod().create_weights(layer, num_experts, hidden_size, intermediate_size, params_dtype)

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        self.install(layer, {GATE_UP: self._quantized(layer.gate_up_proj), DOWN: self._quantized(layer.down_proj)})

    def _quantized(self, stacked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q, scale)`` of each expert's ``[out, in]`` weight, stacked over the experts."""
        group_size = self.weight_format.group_size_for(stacked.shape[2])
        per_expert = [quantize(weight, self.weight_format, group_size) for weight in stacked]
        return torch.stack([q for q, _ in per_expert]), torch.stack([scale for _, scale in per_expert])
