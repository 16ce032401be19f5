"""A mixture-of-experts MLP: the router picks each token's experts, whose outputs are summed with the router's
weights, plus the shared experts every token passes through (GLM-4.5 has them, Qwen3-MoE none).

Modules are named as in the checkpoints (``mlp.gate``, ``mlp.experts``, ``mlp.shared_experts``). A token's
output depends on its own row only: no expert has a capacity that other tokens of the step could fill.

Under tensor parallelism every rank holds every token's hidden state (attention's output is all-reduced) and
the whole router, so each routes every token alike. A rank computes the part of the output its weights hold
(its slice of every expert, or its share of the experts whole; its slice of the shared experts), and one
all-reduce of the routed and shared partial sums together gives the layer's output. An all-to-all dispatch
and combine of the routed rows would move more, not less: each token's k rows, against its one row of
partial sums. Over gloo between two single-thread ranks, hidden 2048, top-8 (least of 30 rounds, ms):

    tokens  all-reduce [T, hidden]  all-to-all there and back (T * k / 2 rows each way)
    1       0.24                    0.28
    16      0.30                    0.81
    256     1.31                    18.5

The same collective runs over NCCL on accelerators (``distributed.parallel_state``).
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.distributed.parallel_state import all_reduce
from autoglm.models.expert_method import ExpertMethod
from autoglm.models.expert_sharding import shard_experts
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.layers import GatedMLP, check_hidden_act
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.model_config import ModelConfig
from autoglm.models.moe_config import MoeConfig
from autoglm.models.moe_router import make_router
from autoglm.models.partition import ModelPartition, partition_model


class SparseMoeBlock(nn.Module):
    """Router, routed experts and (where the model has them) one MLP as wide as all its shared experts, each
    holding ``partition``'s part (None: the whole block, as one rank holds it)."""

    def __init__(self, config: ModelConfig, moe: MoeConfig, linear_method: LinearMethodBase,
                 expert_method: ExpertMethod, partition: ModelPartition | None = None) -> None:
        super().__init__()
        check_hidden_act(config)
        partition = partition or partition_model(config, 0, 1)
        self.gate = make_router(moe, config.hidden_size)
        self.experts = FusedExperts(moe.num_experts, moe.num_experts_per_tok, config.hidden_size,
                                    partition.expert_intermediate.size, expert_method, partition.experts)
        shard_experts(self.experts, partition.expert_intermediate)
        shared = partition.shared_intermediate
        self.shared_experts = (GatedMLP(config, False, linear_method, shared, reduce_output=False)
                               if shared is not None else None)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        topk_ids, topk_weights = self.gate(hidden)
        output = self.experts(hidden, topk_ids, topk_weights)
        if self.shared_experts is not None:
            output = output + self.shared_experts(hidden)
        return all_reduce(output)
