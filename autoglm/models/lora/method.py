"""A projection's base linear method plus the adapters of the step's rows, computed on the fly, never merged.

Each wrapped layer holds a slot table (Punica's layout): ``lora_a`` ``[slots, parts * R, in]`` and ``lora_b``
``[slots, out, R]``, every adapter zero-padded to the rank ``R`` (max_lora_rank), its scale folded into B, and each
stacked part's (q, k, v; gate, up) A rows in its own block of ``R`` and its B in the part's output rows. On a CPU
the tables are float32 whatever the model computes in: PyTorch's bfloat16 matmuls of a few rows and a rank's
columns take a slow path there, and the delta is small next to the base product either way. A step's
rows are gathered in slot order, each slot present computes ``(x A^T) B^T`` for its run of them in batched products,
and the deltas are added back in one scatter: no loop over rows, no merged weights, and the base product is the base
method's own, quantized or not.

Under tensor parallelism A is cut like the weight's input columns (row-parallel layers) and B like its output rows
(column-parallel layers): a row-parallel layer's partial deltas are summed by the layer's own all-reduce.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from autoglm.models.linear_method.base import LinearMethodBase, NativeLinear
from autoglm.models.lora.step_rows import LoRAStepRows


class LoRALinearMethod(LinearMethodBase):
    """Wraps the base method of a layer whose rows may run with adapters; shared by every wrapped layer."""

    def __init__(self, base: LinearMethodBase, step: LoRAStepRows) -> None:
        self.base = base
        self.step = step

    def create_weights(self, layer: nn.Module, input_size: int, output_sizes: Sequence[int],
                       params_dtype: torch.dtype) -> None:
        self.base.create_weights(layer, input_size, output_sizes, params_dtype)

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        self.base.process_weights_after_loading(layer)

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        out = self.base.apply(layer, x, bias)
        step = self.step
        if not step.groups:
            return out
        flat_x, flat_out = x.reshape(-1, x.shape[-1]), out.view(-1, out.shape[-1])
        with _one_cpu_thread(x.device):
            rows = flat_x if step.rows is None else flat_x.index_select(0, step.rows)
            rows = rows.to(layer.lora_a.dtype)
            deltas = [_delta(layer, group.slot, rows[group.start:group.end]) for group in step.groups]
            delta = (deltas[0] if len(deltas) == 1 else torch.cat(deltas)).to(out.dtype)
            if step.rows is None:
                flat_out += delta
            else:  # rows are distinct: a gather, add and copy back, which costs less than index_add_ on a CPU
                flat_out.index_copy_(0, step.rows, flat_out.index_select(0, step.rows).add_(delta))
        return out

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        return self.base.path(layer, x)

    def describe(self, dtype: torch.dtype) -> str:
        return self.base.describe(dtype)

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        return self.base.decode_weight_dtype(compute_dtype)

    def native_linear(self, layer: nn.Module) -> NativeLinear | None:
        """The base weight's: the model runs a step with adapter rows layer by layer, never natively."""
        return self.base.native_linear(layer)


@contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[None]:
    """On a CPU, the low-rank products on one thread: a few rows by a rank's columns is less work than waking
    PyTorch's other threads (profiled under ``bench lora``'s load, steps with four adapters ran twice as fast)."""
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _delta(layer: nn.Module, slot: int, x: torch.Tensor) -> torch.Tensor:
    """``x``'s adapter delta ``[rows, out]`` from slot ``slot``: one shrink over every part, one expand per part."""
    shrunk = x @ layer.lora_a[slot].T  # [rows, parts * R]
    b = layer.lora_b[slot]  # [out, R]
    if len(layer.lora_parts) == 1:
        return shrunk @ b.T
    rank = b.shape[1]
    return torch.cat([shrunk[:, index * rank:(index + 1) * rank] @ b[start:start + size].T
                      for index, (start, size) in enumerate(layer.lora_parts)], dim=1)
