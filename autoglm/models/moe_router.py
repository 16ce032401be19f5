"""How each token picks its experts: the router (the checkpoint's ``mlp.gate``) of each mixture-of-experts family.

A router maps hidden states ``[T, hidden]`` to ``(topk_ids, topk_weights)``: ``[T, k]`` expert ids (int64) and
their float32 weights. Its weight is kept in float32 whatever the model's dtype, and it computes in float32
throughout, as transformers does for GLM-4.5 (Qwen3-MoE's transformers code rounds the logits to the model's
dtype first: the same in a float32 model, a hair more precise here in a bfloat16 one). Quantized models keep
their routers in full precision too: a router's few rows decide which experts run at all.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.moe_config import GROUPED_SIGMOID_ROUTER, SOFTMAX_ROUTER, MoeConfig
from autoglm.models.parameters import checkpoint_parameter

# Keeps the sum of a token's chosen sigmoid scores off zero when they are normalised, as transformers does.
_NORM_EPS = 1e-20


class GroupedSigmoidRouter(nn.Module):
    """GLM-4.5's: each expert's sigmoid score, shifted by ``e_score_correction_bias`` for choosing only; the
    experts are cut into ``num_groups`` groups, each ranked by the sum of its two best shifted scores, and a
    token picks its ``k`` best experts within its ``topk_groups`` best groups. The weights are the chosen
    experts' unshifted scores, rescaled to sum to one where ``norm_topk_prob``, times ``routed_scaling_factor``."""

    def __init__(self, moe: MoeConfig, hidden_size: int) -> None:
        super().__init__()
        self.weight = checkpoint_parameter(moe.num_experts, hidden_size, dtype=torch.float32)
        self.e_score_correction_bias = checkpoint_parameter(moe.num_experts, dtype=torch.float32)
        self.top_k = moe.num_experts_per_tok
        self.num_groups = moe.num_groups
        self.topk_groups = moe.topk_groups
        self.norm_topk_prob = moe.norm_topk_prob
        self.routed_scaling_factor = moe.routed_scaling_factor

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = F.linear(hidden.float(), self.weight).sigmoid()
        for_choice = scores + self.e_score_correction_bias
        if self.topk_groups < self.num_groups:  # with every group kept, the group step changes nothing
            grouped = for_choice.view(hidden.shape[0], self.num_groups, -1)
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
            best_groups = group_scores.topk(self.topk_groups, dim=-1, sorted=False).indices
            kept = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best_groups, True)
            for_choice = grouped.masked_fill(~kept[..., None], float("-inf")).flatten(1)
        topk_ids = for_choice.topk(self.top_k, dim=-1, sorted=False).indices
        topk_weights = scores.gather(1, topk_ids)
        if self.norm_topk_prob:
            topk_weights = topk_weights / (topk_weights.sum(dim=-1, keepdim=True) + _NORM_EPS)
        return topk_ids, topk_weights * self.routed_scaling_factor


class SoftmaxRouter(nn.Module):
    """Qwen3-MoE's: a softmax over all experts, the ``k`` likeliest chosen, their probabilities as weights
    (rescaled to sum to one where ``norm_topk_prob``)."""

    def __init__(self, moe: MoeConfig, hidden_size: int) -> None:
        super().__init__()
        self.weight = checkpoint_parameter(moe.num_experts, hidden_size, dtype=torch.float32)
        self.top_k = moe.num_experts_per_tok
        self.norm_topk_prob = moe.norm_topk_prob

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        probabilities = F.linear(hidden.float(), self.weight).softmax(dim=-1)
        topk_weights, topk_ids = probabilities.topk(self.top_k, dim=-1)
        if self.norm_topk_prob:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return topk_ids, topk_weights


_ROUTERS: dict[str, type[nn.Module]] = {GROUPED_SIGMOID_ROUTER: GroupedSigmoidRouter, SOFTMAX_ROUTER: SoftmaxRouter}


def make_router(moe: MoeConfig, hidden_size: int) -> nn.Module:
    """The router ``moe.router`` names, for hidden states of ``hidden_size``."""
    return _ROUTERS[moe.router](moe, hidden_size)
