"""Which experts each token was routed to, recorded for debugging and for tests that compare routing.

Recording hooks every router of a model for as long as :func:`record_expert_choices` is open, and removes the
hooks when it closes: outside it nothing is hooked, so it costs nothing.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.sparse_moe_block import SparseMoeBlock


@dataclass(frozen=True)
class ExpertChoices:
    """One router call: its input rows and the experts and weights it gave each of them."""

    hidden: torch.Tensor  # [T, hidden]: the router's input
    topk_ids: torch.Tensor  # [T, k]
    topk_weights: torch.Tensor  # [T, k] float32


@contextlib.contextmanager
def record_expert_choices(model: nn.Module) -> Iterator[dict[str, list[ExpertChoices]]]:
    """While open, every call of each router of ``model`` appends its :class:`ExpertChoices` (copies) to the
    yielded dict under the router's module name (``model.layers.1.mlp.gate``, as the checkpoint names it)."""
    recorded: dict[str, list[ExpertChoices]] = defaultdict(list)

    def recorder(name: str):
        def hook(module: nn.Module, args: tuple[torch.Tensor], output: tuple[torch.Tensor, torch.Tensor]) -> None:
            topk_ids, topk_weights = output
            recorded[name].append(ExpertChoices(args[0].detach().clone(), topk_ids.clone(), topk_weights.clone()))
        return hook

    handles = [module.gate.register_forward_hook(recorder(f"{name}.gate"))
               for name, module in model.named_modules() if isinstance(module, SparseMoeBlock)]
    try:
        yield recorded
    finally:
        for handle in handles:
            handle.remove()
