"""How a model's heads, MLP and vocabulary split over the ranks of a tensor-parallel group.

Query heads, the MLP's intermediate size and the vocabulary are cut into one slice per rank
(a vocabulary that does not divide is padded). Key/value heads are cut too where there are at least
as many as ranks; with fewer (grouped-query models), each KV head is replicated on the ranks whose
query heads read it, so every rank still holds whole heads.

A mixture-of-experts model's routed experts split one of two ways. By default each rank holds every expert's
slice of the expert intermediate size, as a dense MLP's. With expert parallelism each rank holds a contiguous
share of the experts whole (shares one apart where the ranks do not divide the count). Either way the shared
experts are cut like a dense MLP and the router is whole on every rank.
"""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.distributed.parallel_state import expert_parallel, tp_rank, tp_size
from autoglm.models.fused_experts import ExpertPlacement
from autoglm.models.model_config import ModelConfig
from autoglm.models.shard import Shard


@dataclass(frozen=True)
class ModelPartition:
    """The slices of each split dimension that one rank holds, in rows of the checkpoint's projections."""

    rank: int
    size: int
    head_dim: int
    query: Shard  # rows of q_proj, columns of o_proj
    key_value: Shard  # rows of k_proj, and of v_proj
    intermediate: Shard  # rows of gate_proj and up_proj, columns of down_proj
    vocab: Shard  # rows of the embedding and the LM head
    experts: ExpertPlacement | None = None  # the routed experts this rank holds; None for a dense model
    expert_intermediate: Shard | None = None  # rows of each held expert's gate and up, columns of its down
    shared_intermediate: Shard | None = None  # the shared experts' MLP, cut as ``intermediate``; None without

    @property
    def num_heads(self) -> int:
        return self.query.size // self.head_dim

    @property
    def num_kv_heads(self) -> int:
        return self.key_value.size // self.head_dim


def _divided(name: str, value: int, size: int, remedy: str = "") -> None:
    if value % size:
        raise ValueError(f"tensor_parallel_size {size} does not divide the model's {name} ({value}); {remedy}"
                         f"sizes that do: {', '.join(str(n) for n in range(1, value + 1) if value % n == 0)}")


def partition_model(config: ModelConfig, rank: int, size: int, expert_parallel: bool = False) -> ModelPartition:
    """Rank ``rank``'s slices of ``config``'s model split ``size`` ways, its experts shared out whole where
    ``expert_parallel``; a ValueError names a dimension that does not split or a combination that cannot work
    (call it with any rank to check the settings before starting workers)."""
    experts, expert_intermediate, shared_intermediate = _expert_shares(config, rank, size, expert_parallel)
    _divided("num_attention_heads", config.num_attention_heads, size)
    if config.moe is None or any(not config.moe.is_sparse(index) for index in range(config.num_hidden_layers)):
        _divided("intermediate_size", config.intermediate_size, size)
    head_dim = config.head_dim
    num_kv_heads = config.num_key_value_heads
    if num_kv_heads >= size:
        _divided("num_key_value_heads", num_kv_heads, size)
        key_value = Shard.split(num_kv_heads * head_dim, size, rank)
    else:  # each KV head replicated on size / num_kv_heads consecutive ranks
        if size % num_kv_heads:
            raise ValueError(f"tensor_parallel_size {size} is more than the model's num_key_value_heads "
                             f"({num_kv_heads}), so it must be a multiple of it")
        key_value = Shard.split(num_kv_heads * head_dim, num_kv_heads, rank * num_kv_heads // size)
    return ModelPartition(
        rank=rank,
        size=size,
        head_dim=head_dim,
        query=Shard.split(config.num_attention_heads * head_dim, size, rank),
        key_value=key_value,
        intermediate=Shard.split(config.intermediate_size, size, rank),
        vocab=Shard.split(config.vocab_size, size, rank),
        experts=experts,
        expert_intermediate=expert_intermediate,
        shared_intermediate=shared_intermediate,
    )


def _expert_shares(config: ModelConfig, rank: int, size: int,
                   expert_parallel: bool) -> tuple[ExpertPlacement | None, Shard | None, Shard | None]:
    """The ``experts``, ``expert_intermediate`` and ``shared_intermediate`` fields of a rank's partition."""
    moe = config.moe
    if moe is None:
        if expert_parallel:
            raise ValueError(f"enable_expert_parallel splits a mixture-of-experts model's experts, and "
                             f"{config.architecture} has none: turn it off")
        return None, None, None
    if expert_parallel:
        if size > moe.num_experts:
            raise ValueError(f"enable_expert_parallel gives each rank at least one expert: tensor_parallel_size "
                             f"({size}) must be at most the model's {moe.num_experts} routed experts")
        experts = ExpertPlacement.share(moe.num_experts, size, rank)
        expert_intermediate = Shard.split(moe.moe_intermediate_size, 1, 0)
    else:
        _divided("moe_intermediate_size", moe.moe_intermediate_size, size,
                 "each rank holds a slice of every expert unless enable_expert_parallel is on; ")
        experts = ExpertPlacement.all_experts(moe.num_experts)
        expert_intermediate = Shard.split(moe.moe_intermediate_size, size, rank)
    shared_size = moe.moe_intermediate_size * moe.num_shared_experts
    if shared_size:
        _divided("shared experts' intermediate size (moe_intermediate_size * n_shared_experts)", shared_size, size,
                 "every rank holds a slice of the shared experts; ")
    return experts, expert_intermediate, Shard.split(shared_size, size, rank) if shared_size else None


def current_partition(config: ModelConfig) -> ModelPartition:
    """This process's slices, by its place in the tensor-parallel group (the whole model outside one)."""
    return partition_model(config, tp_rank(), tp_size(), expert_parallel())
