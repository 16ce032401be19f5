"""Copy Hugging Face checkpoint tensors into a model's (partly fused) parameters."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.linear import MergedLinear

# Buffers some checkpoints carry although every model recomputes them.
_RECOMPUTED_SUFFIXES = ("rotary_emb.inv_freq",)


@dataclass(frozen=True)
class WeightTarget:
    """Where one checkpoint tensor goes: a parameter and the rows of it that the tensor fills."""

    parameter_name: str
    parameter: nn.Parameter
    rows: slice

    @property
    def expected_shape(self) -> tuple[int, ...]:
        return (self.rows.stop - self.rows.start, *self.parameter.shape[1:])


def weight_targets(model: nn.Module) -> dict[str, WeightTarget]:
    """Every checkpoint name the model accepts: its own parameter names, plus the split
    names (``q_proj``, ``gate_proj``, ...) of each fused projection."""
    targets = {
        name: WeightTarget(name, parameter, slice(0, parameter.shape[0]))
        for name, parameter in model.named_parameters()
    }
    for module_name, module in model.named_modules():
        if not isinstance(module, MergedLinear):
            continue
        parent = module_name.rpartition(".")[0]
        for part, rows in module.part_rows.items():
            for kind in ("weight", "bias"):
                fused = getattr(module, kind)
                if fused is not None:
                    targets[f"{parent}.{part}.{kind}"] = WeightTarget(f"{module_name}.{kind}", fused, rows)
    return targets


def load_checkpoint_weights(
    model: nn.Module, weights: Iterable[tuple[str, torch.Tensor]], ignored: frozenset[str] = frozenset()
) -> None:
    """Copy (and cast) each tensor into place; fail on unknown names, wrong shapes, gaps and overlaps."""
    targets = weight_targets(model)
    loaded_rows: dict[str, list[slice]] = defaultdict(list)
    for name, tensor in weights:
        if name in ignored or name.endswith(_RECOMPUTED_SUFFIXES):
            continue
        target = targets.get(name)
        if target is None:
            raise ValueError(f"checkpoint tensor '{name}' matches no parameter of {type(model).__name__}")
        if tuple(tensor.shape) != target.expected_shape:
            raise ValueError(
                f"checkpoint tensor '{name}' has shape {tuple(tensor.shape)}, "
                f"but the model expects {target.expected_shape}"
            )
        earlier = loaded_rows[target.parameter_name]
        if any(rows.start < target.rows.stop and target.rows.start < rows.stop for rows in earlier):
            raise ValueError(
                f"checkpoint tensor '{name}' loads rows of '{target.parameter_name}' that were already "
                "loaded (a tensor given twice, or in both fused and split form)"
            )
        with torch.no_grad():
            target.parameter[target.rows].copy_(tensor)
        earlier.append(target.rows)

    incomplete = [
        name
        for name, parameter in model.named_parameters()
        if sum(rows.stop - rows.start for rows in loaded_rows[name]) != parameter.shape[0]
    ]
    if incomplete:
        raise ValueError(f"checkpoint has no weights for: {', '.join(incomplete)}")
