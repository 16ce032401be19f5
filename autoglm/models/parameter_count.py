"""How many parameters a loaded model has, counted as its float checkpoint counts them, and how many of them
one token's forward reads (fewer in a mixture-of-experts model: what bounds its decode speed).

Integer weights are buffers in their kernel's layout (int4 packs two values a byte, and the float
weight they replace is gone), so counting the model's tensors would count storage, not parameters.
"""
from __future__ import annotations

from torch import nn

from autoglm.models.expert_method.int_weight_experts import QUANTIZED_EXPERT_SHAPES
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.linear_method.int_weight_method import QUANTIZED_SHAPE


def count_parameters(model: nn.Module) -> int:
    """The model's parameters, a tied weight once, each integer weight one per value however packed."""
    counted = sum(parameter.numel() for parameter in model.parameters())
    for module in model.modules():
        shape = getattr(module, QUANTIZED_SHAPE, None)
        if shape is not None and not getattr(module, "tied", False):
            counted += shape.numel()
        counted += _quantized_expert_parameters(module)
    return counted


def _quantized_expert_parameters(module: nn.Module) -> int:
    """The values of a layer of experts' integer weights, however packed (none on a float layer)."""
    return sum(shape.numel() for shape in getattr(module, QUANTIZED_EXPERT_SHAPES, {}).values())


def count_active_parameters(model: nn.Module) -> int:
    """The parameters a token's forward uses: all of them but the routed experts it is not sent to (a layer of
    experts of which each token takes k counts k experts' worth)."""
    active = count_parameters(model)
    for module in model.modules():
        if isinstance(module, FusedExperts):
            held = (sum(parameter.numel() for parameter in module.parameters(recurse=False))
                    + _quantized_expert_parameters(module))
            active -= held - held // len(module.placement.local_experts) * module.top_k
    return active
