"""Route Hugging Face checkpoint tensors to a model's (partly fused) parameters.

This module decides which parameter, and which shard of it, a checkpoint name fills, and checks
that every parameter is filled exactly once; the parameter's own ``weight_loader`` (see
``parameters``) does the copying.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.fused_experts import FusedExperts
from autoglm.models.linear import MergedLinear
from autoglm.models.parameters import WeightShapeError, default_weight_loader

# Buffers some checkpoints carry although every model recomputes them.
_RECOMPUTED_SUFFIXES = ("rotary_emb.inv_freq",)


@dataclass(frozen=True)
class WeightTarget:
    """Where one checkpoint tensor goes: a parameter, and the shard of it (None: all of it)."""

    parameter_name: str
    parameter: nn.Parameter
    shard_id: int | None = None


def weight_targets(model: nn.Module) -> dict[str, WeightTarget]:
    """Every checkpoint name the model accepts: its own parameter names, plus the split
    names (``q_proj``, ``gate_proj``, ...) of each fused projection's parameters, and the
    per-expert names (``experts.3.up_proj.weight``) of each layer of stacked experts."""
    targets = {name: WeightTarget(name, parameter) for name, parameter in model.named_parameters()}
    for module_name, module in model.named_modules():
        if isinstance(module, FusedExperts):
            for name, (parameter_name, shard_id) in module.checkpoint_shards().items():
                targets[f"{module_name}.{name}"] = WeightTarget(f"{module_name}.{parameter_name}",
                                                                getattr(module, parameter_name), shard_id)
        if not isinstance(module, MergedLinear):
            continue
        parent = module_name.rpartition(".")[0]
        for shard_id, part in enumerate(module.part_names):
            for kind, parameter in module.named_parameters(recurse=False):
                targets[f"{parent}.{part}.{kind}"] = WeightTarget(f"{module_name}.{kind}", parameter, shard_id)
    return targets


def checkpoint_names_elsewhere(model: nn.Module) -> frozenset[str]:
    """The checkpoint names of the experts this rank leaves to others under expert parallelism (none otherwise)."""
    return frozenset(f"{module_name}.{name}" for module_name, module in model.named_modules()
                     if isinstance(module, FusedExperts) for name in module.checkpoint_names_elsewhere())


def load_checkpoint_weights(
    model: nn.Module, weights: Iterable[tuple[str, torch.Tensor]], ignored: frozenset[str] = frozenset()
) -> None:
    """Load (and cast) each tensor into place; fail on unknown names, wrong shapes, gaps and overlaps. Tensors
    of experts other ranks hold are passed over."""
    ignored = ignored | checkpoint_names_elsewhere(model)
    targets = weight_targets(model)
    shard_ids: dict[str, set[int]] = defaultdict(set)
    for target in targets.values():
        if target.shard_id is not None:
            shard_ids[target.parameter_name].add(target.shard_id)
    loaded: dict[str, set[int | None]] = defaultdict(set)
    for name, tensor in weights:
        if name in ignored or name.endswith(_RECOMPUTED_SUFFIXES):
            continue
        target = targets.get(name)
        if target is None:
            raise ValueError(f"checkpoint tensor '{name}' matches no parameter of {type(model).__name__}")
        earlier = loaded[target.parameter_name]
        if None in earlier or target.shard_id in earlier or (target.shard_id is None and earlier):
            raise ValueError(
                f"checkpoint tensor '{name}' loads rows of '{target.parameter_name}' that were already "
                "loaded (a tensor given twice, or in both fused and split form)"
            )
        weight_loader = getattr(target.parameter, "weight_loader", default_weight_loader)
        try:
            weight_loader(target.parameter, tensor, target.shard_id)
        except WeightShapeError as error:
            raise ValueError(
                f"checkpoint tensor '{name}' has shape {error.loaded_shape}, "
                f"but the model expects {error.expected_shape}"
            ) from None
        earlier.add(target.shard_id)

    def complete(name: str) -> bool:  # loaded whole, or every one of its shards
        return None in loaded[name] or (bool(shard_ids[name]) and loaded[name] == shard_ids[name])

    incomplete = [name for name, _ in model.named_parameters() if not complete(name)]
    if incomplete:
        raise ValueError(f"checkpoint has no weights for: {', '.join(incomplete)}")
