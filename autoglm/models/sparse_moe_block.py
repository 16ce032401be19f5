"""A mixture-of-experts MLP: the router picks each token's experts, whose outputs are summed with the router's
weights, plus the shared experts every token passes through (GLM-4.5 has them, Qwen3-MoE none).

Modules are named as in the checkpoints (``mlp.gate``, ``mlp.experts``, ``mlp.shared_experts``). A token's
output depends on its own row only: no expert has a capacity that other tokens of the step could fill.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.models.expert_method import ExpertMethod
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.layers import GatedMLP, check_hidden_act
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.model_config import ModelConfig
from autoglm.models.moe_config import MoeConfig
from autoglm.models.moe_router import make_router
from autoglm.models.shard import Shard


class SparseMoeBlock(nn.Module):
    """Router, routed experts and (where the model has them) one MLP as wide as all its shared experts."""

    def __init__(self, config: ModelConfig, moe: MoeConfig, linear_method: LinearMethodBase,
                 expert_method: ExpertMethod) -> None:
        super().__init__()
        check_hidden_act(config)
        self.gate = make_router(moe, config.hidden_size)
        self.experts = FusedExperts(moe.num_experts, moe.num_experts_per_tok, config.hidden_size,
                                    moe.moe_intermediate_size, expert_method)
        shared_size = moe.moe_intermediate_size * moe.num_shared_experts
        self.shared_experts = (GatedMLP(config, False, linear_method, Shard.split(shared_size, 1, 0))
                               if shared_size else None)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        topk_ids, topk_weights = self.gate(hidden)
        routed = self.experts(hidden, topk_ids, topk_weights)
        return routed if self.shared_experts is None else routed + self.shared_experts(hidden)
