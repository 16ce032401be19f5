"""A model's LoRA slot tables: ``max_loras`` adapters held in the batch's format, installed and replaced by slot."""
from __future__ import annotations

import torch
from torch import nn

from autoglm.models.linear import Linear, MergedLinear
from autoglm.models.lora.adapter import LoRAAdapter
from autoglm.models.lora.method import LoRALinearMethod
from autoglm.models.lora.step_rows import LoRAStepRows
from autoglm.models.lora.targets import ProjectionTarget, projection_targets


class LoRASlots:
    """The wrapped projections of one model (this rank's shard), whose slots the runner fills as plans say."""

    def __init__(self, model: nn.Module, max_loras: int, max_rank: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        self.max_loras = max_loras
        self.max_rank = max_rank
        self.targets: dict[str, ProjectionTarget] = projection_targets(model)
        self.step = LoRAStepRows()
        self.layers: list[Linear] = list({id(t.layer): t.layer for t in self.targets.values()}.values())
        wrappers: dict[int, LoRALinearMethod] = {}
        for layer in self.layers:
            base = layer.linear_method
            layer.linear_method = wrappers.setdefault(id(base), LoRALinearMethod(base, self.step))
            _add_tables(layer, max_loras, max_rank, dtype, device)

    def install(self, slot: int, adapter: LoRAAdapter) -> None:
        """Put ``adapter`` in ``slot`` in place of what it held: this rank's slice of each matrix, padded to
        the table's rank, B scaled."""
        for layer in self.layers:
            layer.lora_a[slot].zero_()
            layer.lora_b[slot].zero_()
        for module, (a, b) in adapter.weights.items():
            target = self.targets[module]
            layer = target.layer
            parts = range(len(layer.lora_parts)) if target.part is None else (target.part,)
            whole_sizes = _whole_sizes(layer)
            b_parts = b.split([whole_sizes[part] for part in parts]) if target.part is None else (b,)
            a_local = _input_slice(layer, a).to(layer.lora_a.dtype)
            for part, b_part in zip(parts, b_parts):
                start, size = layer.lora_parts[part]
                rows = slice(part * self.max_rank, part * self.max_rank + adapter.rank)
                layer.lora_a[slot, rows].copy_(a_local)
                b_local = _output_slice(layer, part, b_part) * adapter.scale
                layer.lora_b[slot, start:start + size, :adapter.rank].copy_(b_local)


def _add_tables(layer: Linear, max_loras: int, max_rank: int, dtype: torch.dtype, device: torch.device) -> None:
    """Empty slots on ``layer``, in the dtype the model computes in, and where each stacked part's rows start."""
    sizes = list(layer.part_sizes) if isinstance(layer, MergedLinear) else [layer.out_features]
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    layer.lora_parts = tuple(zip(starts, sizes))
    layer.register_buffer("lora_a", torch.zeros(max_loras, len(sizes) * max_rank, layer.in_features, dtype=dtype,
                                                device=device), persistent=False)
    layer.register_buffer("lora_b", torch.zeros(max_loras, layer.out_features, max_rank, dtype=dtype, device=device),
                          persistent=False)


def _whole_sizes(layer: Linear) -> list[int]:
    shards = getattr(layer, "output_shards", None)
    return [shard.extent for shard in shards] if shards is not None else [size for _, size in layer.lora_parts]


def _input_slice(layer: Linear, a: torch.Tensor) -> torch.Tensor:
    """This rank's columns of A: a row-parallel layer's slice of the input, as its weight holds."""
    shard = getattr(layer, "input_shard", None)
    return a if shard is None else shard.take(a, 1)


def _output_slice(layer: Linear, part: int, b: torch.Tensor) -> torch.Tensor:
    """This rank's rows of part ``part``'s B: a column-parallel layer's slice of the outputs, as its weight holds."""
    shards = getattr(layer, "output_shards", None)
    return b if shards is None else shards[part].take(b, 0)
