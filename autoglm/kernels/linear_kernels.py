"""The compiled small-batch linear kernels, what each computes in and what CPU each needs.

A decode step multiplies few rows by every weight, so its speed is the rate weights stream
from memory; PyTorch's matmuls are built for many rows. Each kernel here reads bfloat16
weights in place for few rows on one kind of CPU. Which kernel a model uses, and up to how
many rows, is chosen in ``models.linear_method.selection`` and measured in ``row_limits``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.platforms import cpu_has_flags


@dataclass(frozen=True)
class CpuLinearKernel:
    """One kernel of the library: ``y = x W^T (+ b)`` for ``x`` in ``activation_dtype`` and a bfloat16 ``W``
    whose input size is a multiple of ``k_multiple``."""

    name: str
    function: str  # its name in the compiled library
    cpu_flags: tuple[str, ...]
    activation_dtype: torch.dtype
    k_multiple: int
    takes_bias: bool
    native_kind: str | None = None  # what the native decode step calls this kernel, if it calls it

    def missing_flags(self) -> tuple[str, ...]:
        """The CPU flags this kernel needs and this CPU lacks (or hides: ``AUTOGLM_CPU_DISABLE_FLAGS``)."""
        return tuple(flag for flag in self.cpu_flags if not cpu_has_flags(flag))

    def runs_here(self) -> bool:
        return not self.missing_flags()

    def reads(self, weight: torch.Tensor) -> bool:
        """Whether this kernel can read ``weight`` as it is: bfloat16, contiguous, on the CPU, a fitting width."""
        return (weight.dtype == torch.bfloat16 and weight.device.type == "cpu" and weight.dim() == 2
                and weight.is_contiguous() and weight.shape[1] % self.k_multiple == 0)

    def loaded(self) -> bool:
        """Whether the running step uses the library holding this kernel (see ``cpu_extension``)."""
        return cpu_kernels() is not None

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor | None:
        """The product, or None where the step does not use the library (the caller then takes PyTorch's path)."""
        library = cpu_kernels()
        if library is None:
            return None
        function = getattr(library, self.function)
        if self.takes_bias:
            return function(x, weight, bias)
        y = function(x, weight)
        return y if bias is None else y + bias


BF16_DOT_AVX512 = CpuLinearKernel("bf16-dot-avx512", "linear_bf16_dot", ("avx512f", "avx512bw", "avx512_bf16"),
                                  torch.bfloat16, k_multiple=32, takes_bias=True, native_kind="bf16-dot")
BF16_WEIGHT_AVX512 = CpuLinearKernel("bf16-weight-avx512", "linear_bf16_weight_avx512", ("avx512f", "avx512bw"),
                                     torch.float32, k_multiple=16, takes_bias=False, native_kind="bf16-weight")
BF16_WEIGHT_AVX2 = CpuLinearKernel("bf16-weight-avx2", "linear_bf16_weight_avx2", ("avx2", "fma"),
                                   torch.float32, k_multiple=8, takes_bias=False)

# Fastest first: the first that runs on a CPU, for a model's compute dtype, is the default there.
CPU_LINEAR_KERNELS = (BF16_DOT_AVX512, BF16_WEIGHT_AVX512, BF16_WEIGHT_AVX2)
TORCH_PATH = "torch"  # the name of PyTorch's own matmul wherever a path is named


def kernel_named(name: str) -> CpuLinearKernel:
    for kernel in CPU_LINEAR_KERNELS:
        if kernel.name == name:
            return kernel
    raise KeyError(name)


def kernels_for(activation_dtype: torch.dtype) -> list[CpuLinearKernel]:
    """The kernels that compute in ``activation_dtype``, fastest first, whether or not this CPU runs them."""
    return [kernel for kernel in CPU_LINEAR_KERNELS if kernel.activation_dtype == activation_dtype]
