"""Which linear method a model's projections use: chosen once per model, at load time."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from autoglm.kernels.linear_kernels import CPU_LINEAR_KERNELS, TORCH_PATH, CpuLinearKernel, kernel_named, kernels_for
from autoglm.models.expert_method import ExpertMethod, UnquantizedExpertMethod
from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.cpu_kernel import CpuKernelLinearMethod
from autoglm.models.linear_method.int_weights import GroupSizeError
from autoglm.models.linear_method.row_limits import EveryRow, RowLimit
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod

AUTO = "auto"


@dataclass(frozen=True)
class LinearMethods:
    """The method of the decoder layers' projections, and separately the LM head's (tied or not),
    which quantization leaves unquantized unless asked; and the method of a mixture-of-experts model's
    routed experts."""

    layers: LinearMethodBase = field(default_factory=UnquantizedLinearMethod)
    lm_head: LinearMethodBase = field(default_factory=UnquantizedLinearMethod)
    experts: ExpertMethod = field(default_factory=UnquantizedExpertMethod)


def cpu_kernel_activation_dtype(device: torch.device, dtype: torch.dtype,
                                requested_dtype: torch.dtype) -> torch.dtype | None:
    """The activation dtype a CPU linear kernel would take for this model, or None where no kernel applies:
    a bfloat16 model computed in bfloat16, or computed in float32 (upcast on a CPU without bfloat16 units).
    A float32 checkpoint keeps PyTorch's matmul: a bfloat16 copy of its weights would change its results."""
    if device.type != "cpu" or requested_dtype != torch.bfloat16 or dtype not in (torch.bfloat16, torch.float32):
        return None
    return dtype


def choose_cpu_kernel(name: str, activation_dtype: torch.dtype | None) -> CpuLinearKernel | None:
    """``auto``: the fastest kernel this CPU runs for the activation dtype; ``torch``: none; a kernel's name:
    that kernel, refused with the reason where it cannot serve this model on this CPU."""
    if name == TORCH_PATH or activation_dtype is None and name == AUTO:
        return None
    if name == AUTO:
        return next((kernel for kernel in kernels_for(activation_dtype) if kernel.runs_here()), None)
    try:
        kernel = kernel_named(name)
    except KeyError:
        names = ", ".join([AUTO, TORCH_PATH, *(kernel.name for kernel in CPU_LINEAR_KERNELS)])
        raise ValueError(f"cpu_linear_kernel '{name}' is not a kernel; choose one of {names}") from None
    if activation_dtype != kernel.activation_dtype:
        computed = "no CPU kernel" if activation_dtype is None else str(activation_dtype).removeprefix("torch.")
        raise ValueError(f"cpu_linear_kernel '{name}' takes {str(kernel.activation_dtype).removeprefix('torch.')} "
                         f"activations, but this model computes with {computed} here; kernels for it: "
                         f"{_kernel_names(activation_dtype)}")
    if not kernel.runs_here():
        raise ValueError(f"cpu_linear_kernel '{name}' needs the CPU flags {', '.join(kernel.missing_flags())}, "
                         f"which this CPU lacks (or AUTOGLM_CPU_DISABLE_FLAGS hides); kernels this CPU runs "
                         f"for this model: {_kernel_names(activation_dtype, runnable_only=True)}")
    return kernel


def _kernel_names(activation_dtype: torch.dtype | None, runnable_only: bool = False) -> str:
    kernels = kernels_for(activation_dtype) if activation_dtype is not None else []
    names = [kernel.name for kernel in kernels if kernel.runs_here() or not runnable_only]
    return ", ".join([AUTO, TORCH_PATH, *names])


def linear_methods_for(device: torch.device, dtype: torch.dtype, requested_dtype: torch.dtype,
                       cpu_linear_kernel: str = AUTO, row_limit: RowLimit | None = None,
                       kernels_coming: bool = False) -> LinearMethods:
    """Unquantized, except for a bfloat16 checkpoint on the CPU when the kernel library is coming
    (``kernels_coming``): then every projection, the LM head included, takes a compiled kernel for the
    steps ``row_limit`` allows (every step when None)."""
    kernel = choose_cpu_kernel(cpu_linear_kernel, cpu_kernel_activation_dtype(device, dtype, requested_dtype))
    if kernel is None or not kernels_coming:
        return LinearMethods()
    method = CpuKernelLinearMethod(kernel, row_limit or EveryRow())
    return LinearMethods(layers=method, lm_head=method)


def process_weights_after_loading(model: nn.Module) -> None:
    """Let each projection's and each layer of experts' method post-process the weights just loaded into it."""
    for name, module in model.named_modules():
        methods = [getattr(module, "linear_method", None), getattr(module, "expert_method", None)]
        for method in methods:
            if isinstance(method, (LinearMethodBase, ExpertMethod)):
                try:
                    method.process_weights_after_loading(module)
                except GroupSizeError as error:
                    raise GroupSizeError(f"layer '{name}': {error}") from None
