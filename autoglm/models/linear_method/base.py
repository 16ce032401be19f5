"""The interface every way of storing and multiplying a projection's weights implements."""
from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class NativeLinear:
    """A projection as the native decode step (``kernels/decode_step.cpp``) reads it: which kernel
    multiplies by it, and the tensors that kernel streams, kept by the layer."""

    kind: str  # "bf16-dot", "bf16-weight" or "int-a8" (int8/int4 weights, int8 activations)
    weight: torch.Tensor
    scales: torch.Tensor | None = None
    bias: torch.Tensor | None = None  # float32 [out_features]
    bits: int = 16
    group_size: int = 0
    max_rows: int = sys.maxsize  # steps of more rows take another path layer by layer, so not this one


class LinearMethodBase(ABC):
    """Creates a projection's weight parameters, post-processes them once loaded, and computes
    ``x W^T + b`` from them. One instance serves many layers: what differs per layer lives on it.

    The layer owns its bias (loaded as it is, whatever the method); the method owns everything
    the weight becomes (``weight``, and later e.g. packed int4 values and their scales).
    """

    @abstractmethod
    def create_weights(self, layer: nn.Module, input_size: int, output_sizes: Sequence[int],
                       params_dtype: torch.dtype) -> None:
        """Register on ``layer`` the parameters of a ``[sum(output_sizes), input_size]`` weight whose
        rows stack one checkpoint projection per entry of ``output_sizes``, each with its ``weight_loader``."""

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        """Turn the loaded checkpoint values into what :meth:`apply` reads (pack, copy, transpose).
        A tied LM head's ``weight`` is the embedding's: a method may add to the layer but not replace it."""

    @abstractmethod
    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``x W^T + b`` for ``x`` of shape ``[..., input_size]``."""

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        """The name of the code :meth:`apply` takes for this input (what ``--profile`` counts per layer)."""
        return "torch"

    def describe(self, dtype: torch.dtype) -> str:
        """What start-up logs say of the weights this method keeps, in a model computing in ``dtype``."""
        return f"{str(dtype).removeprefix('torch.')} weights"

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        """The dtype a step of few rows reads its weights in (what bounds decode speed), right now."""
        return compute_dtype

    def native_linear(self, layer: nn.Module) -> NativeLinear | None:
        """How the native decode step multiplies by this layer's weight, or None where it cannot (the
        model then runs its steps op by op). Its result must equal :meth:`apply`'s bit for bit."""
        return None
