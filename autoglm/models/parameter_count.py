"""How many parameters a loaded model has, counted as its float checkpoint counts them.

Integer weights are buffers in their kernel's layout (int4 packs two values a byte, and the float
weight they replace is gone), so counting the model's tensors would count storage, not parameters.
"""
from __future__ import annotations

from torch import nn

from autoglm.models.linear_method.int_weight_method import QUANTIZED_SHAPE


def count_parameters(model: nn.Module) -> int:
    """The model's parameters, a tied weight once, each integer weight one per value however packed."""
    counted = sum(parameter.numel() for parameter in model.parameters())
    for module in model.modules():
        shape = getattr(module, QUANTIZED_SHAPE, None)
        if shape is not None and not getattr(module, "tied", False):
            counted += shape.numel()
    return counted
