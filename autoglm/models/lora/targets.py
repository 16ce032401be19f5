"""The projections of a decoder that a LoRA adapter may change, under the names PEFT gives them.

PEFT names a projection by its module in the Hugging Face model (``model.layers.3.self_attn.q_proj``). Here q, k
and v are one fused layer, as are gate and up, so a name maps to a layer and the part of its output rows it
stands for; a checkpoint that fuses a projection itself (GLM-4's ``mlp.gate_up_proj``) names the whole layer.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from autoglm.models.linear import Linear, MergedLinear

# The projections an adapter may target, split or fused.
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj",
                  "gate_up_proj")


@dataclass(frozen=True)
class ProjectionTarget:
    """One projection an adapter may change: the layer that computes it, the part of that layer's output rows
    it is (None: all of them), and its whole shape as the adapter's matrices see it (every rank's together)."""

    layer: Linear
    part: int | None
    in_features: int
    out_features: int


def whole_in_features(layer: Linear) -> int:
    """The layer's input size over every rank (a row-parallel layer holds a slice of it)."""
    shard = getattr(layer, "input_shard", None)
    return layer.in_features if shard is None else shard.extent


def whole_part_sizes(layer: Linear) -> list[int]:
    """Each stacked part's output size over every rank (a column-parallel layer holds a slice of each)."""
    shards = getattr(layer, "output_shards", None)
    if shards is not None:
        return [shard.extent for shard in shards]
    return list(layer.part_sizes) if isinstance(layer, MergedLinear) else [layer.out_features]


def projection_targets(model: nn.Module) -> dict[str, ProjectionTarget]:
    """Every projection of the model's decoder layers an adapter may name, keyed by PEFT's module name. A
    mixture-of-experts layer's experts are not among them (only its attention is)."""
    targets: dict[str, ProjectionTarget] = {}
    for module_name, module in model.named_modules():
        if not isinstance(module, Linear) or ".layers." not in module_name:
            continue
        short_name = module_name.rpartition(".")[2]
        if short_name not in TARGET_MODULES:
            continue
        in_features, sizes = whole_in_features(module), whole_part_sizes(module)
        targets[module_name] = ProjectionTarget(module, None, in_features, sum(sizes))
        if isinstance(module, MergedLinear):
            parent = module_name.rpartition(".")[0]
            for part, (name, size) in enumerate(zip(module.part_names, sizes)):
                targets[f"{parent}.{name}"] = ProjectionTarget(module, part, in_features, size)
    return targets
