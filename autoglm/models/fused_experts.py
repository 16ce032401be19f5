"""A layer's routed experts with their weights stacked, so that one call computes every expert a step routes to.

How the weights are stored and multiplied is the layer's :class:`ExpertMethod` (``expert_method/``), as a
projection's is its linear method. The layer knows which of the model's experts it holds
(:class:`ExpertPlacement`: all of them while every rank holds every expert) and the checkpoint names of each:
hub checkpoints store one tensor per expert and projection (``mlp.experts.3.gate_proj.weight``), which load
into that expert's rows of the stacked parameters; transformers 5's fused names
(``mlp.experts.gate_up_proj``) are the parameters' own and load whole.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.expert_method import ExpertMethod


@dataclass(frozen=True)
class ExpertPlacement:
    """The model's experts a layer holds, by id, in the order its weights stack them."""

    local_experts: tuple[int, ...]

    @classmethod
    def all_experts(cls, num_experts: int) -> ExpertPlacement:
        return cls(tuple(range(num_experts)))


class FusedExperts(nn.Module):
    """``num_experts`` gated MLPs ``hidden -> intermediate -> hidden``, run for the tokens routed to each."""

    def __init__(self, num_experts: int, top_k: int, hidden_size: int, intermediate_size: int,
                 expert_method: ExpertMethod) -> None:
        super().__init__()
        self.placement = ExpertPlacement.all_experts(num_experts)
        self.top_k = top_k  # experts per token: what a token's forward reads of this layer's
        self.expert_method = expert_method
        expert_method.create_weights(self, len(self.placement.local_experts), hidden_size, intermediate_size,
                                     torch.get_default_dtype())

    def forward(self, hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """Each token's routed experts' outputs summed with their weights (``topk_ids``, ``topk_weights`` ``[T, k]``;
        the model's expert ids, which index this layer's stack as it is while the layer holds every expert)."""
        return self.expert_method.apply(self, hidden, topk_ids, topk_weights)

    def checkpoint_shards(self) -> dict[str, tuple[str, int]]:
        """Each per-expert checkpoint name, relative to this layer (``3.gate_proj.weight``), mapped to the
        parameter it loads into and its shard there (see ``parameters.StackedExpertsWeightLoader``)."""
        shards = {}
        for parameter_name, parameter in self.named_parameters(recurse=False):
            names = parameter.expert_checkpoint_names
            for slot, expert in enumerate(self.placement.local_experts):
                for part, name in enumerate(names):
                    shards[f"{expert}.{name}"] = (parameter_name, slot * len(names) + part)
        return shards
