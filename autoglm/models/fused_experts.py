"""A layer's routed experts with their weights stacked, so that one call computes every expert a step routes to.

How the weights are stored and multiplied is the layer's :class:`ExpertMethod` (``expert_method/``), as a
projection's is its linear method. The layer knows which of the model's experts it holds
(:class:`ExpertPlacement`: all of them while every rank holds every expert, a contiguous share under expert
parallelism, where tokens routed to the others' experts are left to them) and the checkpoint names of each:
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

    @classmethod
    def share(cls, num_experts: int, num_ranks: int, rank: int) -> ExpertPlacement:
        """Rank ``rank``'s contiguous share of ``num_experts`` split ``num_ranks`` ways; where that does not divide,
        the first ``num_experts % num_ranks`` ranks hold one more (8 over 3: 3, 3, 2)."""
        if not 0 < num_ranks <= num_experts or not 0 <= rank < num_ranks:
            raise ValueError(f"cannot give rank {rank} of {num_ranks} a share of {num_experts} experts: need "
                             f"1 <= ranks <= experts and 0 <= rank < ranks")
        base, extra = divmod(num_experts, num_ranks)
        start = rank * base + min(rank, extra)
        return cls(tuple(range(start, start + base + (rank < extra))))


class FusedExperts(nn.Module):
    """``num_experts`` gated MLPs ``hidden -> intermediate -> hidden``, run for the tokens routed to each."""

    def __init__(self, num_experts: int, top_k: int, hidden_size: int, intermediate_size: int,
                 expert_method: ExpertMethod, placement: ExpertPlacement | None = None) -> None:
        """``intermediate_size``: the rows of each expert this layer holds (a slice under tensor parallelism);
        ``placement``: the experts it holds (None: all ``num_experts``)."""
        super().__init__()
        self.num_experts = num_experts
        self.placement = placement or ExpertPlacement.all_experts(num_experts)
        self.register_buffer("local_slots", self._local_slots() if len(self.placement.local_experts) < num_experts
                             else None, persistent=False)
        self.top_k = top_k  # experts per token: what a token's forward reads of this layer's
        self.expert_method = expert_method
        expert_method.create_weights(self, len(self.placement.local_experts), hidden_size, intermediate_size,
                                     torch.get_default_dtype())

    def forward(self, hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """Each token's routed experts' outputs summed with their weights (``topk_ids``, ``topk_weights`` ``[T, k]``;
        the model's expert ids). Holding a share of the experts, the sum is over this layer's experts only."""
        if self.local_slots is not None:
            topk_ids = self.local_slots[topk_ids]
        return self.expert_method.apply(self, hidden, topk_ids, topk_weights)

    def _local_slots(self) -> torch.Tensor:
        """Each model expert's slot in this layer's stack; the slot count for an expert another rank holds, which
        ``ExpertGroups`` leaves out."""
        local = self.placement.local_experts
        slots = torch.full((self.num_experts,), len(local), dtype=torch.int64)
        slots[list(local)] = torch.arange(len(local))
        return slots

    def checkpoint_names_elsewhere(self) -> frozenset[str]:
        """The per-expert checkpoint names, relative to this layer, of the experts other ranks hold: a loader
        skips them unread."""
        held = set(self.placement.local_experts)
        names = [name for parameter in self.parameters(recurse=False) for name in parameter.expert_checkpoint_names]
        return frozenset(f"{expert}.{name}" for expert in range(self.num_experts) if expert not in held
                         for name in names)

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
