"""Which linear method a model's projections use: chosen once per model, at load time."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.cpu_bf16_weight import CpuBf16WeightLinearMethod
from autoglm.models.linear_method.int_weights import GroupSizeError
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod


@dataclass(frozen=True)
class LinearMethods:
    """The method of the decoder layers' projections, and separately the LM head's (tied or not),
    which quantization leaves unquantized unless asked."""

    layers: LinearMethodBase = field(default_factory=UnquantizedLinearMethod)
    lm_head: LinearMethodBase = field(default_factory=UnquantizedLinearMethod)


def linear_methods_for(device: torch.device, dtype: torch.dtype, requested_dtype: torch.dtype,
                       cpu_bf16_weight_kernel: bool) -> LinearMethods:
    """Unquantized, except for a bfloat16 checkpoint computed in float32 on the CPU (see
    ``platforms.compute_dtype``) when ``cpu_bf16_weight_kernel`` says the kernel is wanted and coming:
    then every projection, the LM head included, also keeps a bfloat16 copy for steps of few rows."""
    upcast_bf16 = device.type == "cpu" and requested_dtype == torch.bfloat16 and dtype == torch.float32
    if upcast_bf16 and cpu_bf16_weight_kernel:
        method = CpuBf16WeightLinearMethod()
        return LinearMethods(layers=method, lm_head=method)
    return LinearMethods()


def process_weights_after_loading(model: nn.Module) -> None:
    """Let each projection's method post-process the weights just loaded into it."""
    for name, module in model.named_modules():
        method = getattr(module, "linear_method", None)
        if isinstance(method, LinearMethodBase):
            try:
                method.process_weights_after_loading(module)
            except GroupSizeError as error:
                raise GroupSizeError(f"layer '{name}': {error}") from None
