"""How a model's heads, MLP and vocabulary split over the ranks of a tensor-parallel group.

Query heads, the MLP's intermediate size and the vocabulary are cut into one slice per rank
(a vocabulary that does not divide is padded). Key/value heads are cut too where there are at least
as many as ranks; with fewer (grouped-query models), each KV head is replicated on the ranks whose
query heads read it, so every rank still holds whole heads.
"""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.distributed.parallel_state import tp_rank, tp_size
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

    @property
    def num_heads(self) -> int:
        return self.query.size // self.head_dim

    @property
    def num_kv_heads(self) -> int:
        return self.key_value.size // self.head_dim


def _divided(name: str, value: int, size: int) -> None:
    if value % size:
        raise ValueError(f"tensor_parallel_size {size} does not divide the model's {name} ({value}); "
                         f"sizes that do: {', '.join(str(n) for n in range(1, value + 1) if value % n == 0)}")


def partition_model(config: ModelConfig, rank: int, size: int) -> ModelPartition:
    """Rank ``rank``'s slices of ``config``'s model split ``size`` ways; a ValueError names a dimension
    that does not split (call it with any rank to check the settings before starting workers)."""
    if config.moe is not None and size > 1:
        raise ValueError(f"{config.architecture} is a mixture-of-experts model, whose experts run on one rank only "
                         f"for now: tensor_parallel_size must be 1, got {size}")
    _divided("num_attention_heads", config.num_attention_heads, size)
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
    )


def current_partition(config: ModelConfig) -> ModelPartition:
    """This process's slices, by its place in the tensor-parallel group (the whole model outside one)."""
    return partition_model(config, tp_rank(), tp_size())
