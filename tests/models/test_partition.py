"""How a model splits over tensor-parallel ranks, and how a rank's slice is cut from a checkpoint tensor."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from autoglm.models import ModelConfig, load_model
from autoglm.models.parallel_linear import ColumnParallelLinear, RowParallelLinear
from autoglm.models.parallel_vocab import ParallelLMHead, VocabParallelEmbedding
from autoglm.models.parameters import WeightShapeError
from autoglm.models.partition import partition_model
from autoglm.models.shard import Shard
from tests.tiny_models import make_tiny_checkpoint, tiny_config


@pytest.fixture(scope="module")
def config() -> ModelConfig:  # 4 query heads over 2 KV heads of 16 dims, intermediate 128, vocab 320
    return ModelConfig.from_dict(tiny_config("llama").to_dict())


def test_query_heads_intermediate_and_vocab_split_evenly(config: ModelConfig) -> None:
    partition = partition_model(config, rank=1, size=2)
    assert (partition.num_heads, partition.num_kv_heads) == (2, 1)
    assert (partition.query.start, partition.key_value.start, partition.intermediate.start) == (32, 16, 64)
    assert (partition.vocab.start, partition.vocab.size) == (160, 160)


def test_fewer_kv_heads_than_ranks_replicates_each_on_the_ranks_that_read_it(config: ModelConfig) -> None:
    wide = dataclasses.replace(config, num_attention_heads=8)
    kv_head_of_rank = [partition_model(wide, rank, 4).key_value.index for rank in range(4)]
    assert kv_head_of_rank == [0, 0, 1, 1]
    assert partition_model(wide, 3, 4).num_kv_heads == 1


@pytest.mark.parametrize("changes,size,message", [
    ({}, 3, r"does not divide the model's num_attention_heads \(4\); sizes that do: 1, 2, 4"),
    ({"num_attention_heads": 12, "num_key_value_heads": 3, "intermediate_size": 96}, 4,
     r"more than the model's num_key_value_heads \(3\), so it must be a multiple of it"),
    ({"intermediate_size": 130}, 4, "does not divide the model's intermediate_size"),
])
def test_a_size_that_does_not_split_the_model_is_refused(config: ModelConfig, changes, size: int,
                                                          message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition_model(dataclasses.replace(config, **changes), 0, size)


def test_the_last_slice_of_a_dim_that_does_not_divide_is_padded_with_zeros() -> None:
    rows = torch.arange(10.0).reshape(5, 2)
    last = Shard.split(5, 2, 1)
    assert last.take(rows, 0).tolist() == [[6.0, 7.0], [8.0, 9.0], [0.0, 0.0]]
    with pytest.raises(WeightShapeError):
        last.take(rows[:4], 0)


def test_one_process_builds_the_plain_layers(tmp_path) -> None:
    model, _ = load_model(make_tiny_checkpoint("llama", tmp_path), torch.float32, torch.device("cpu"))
    parallel = (ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding, ParallelLMHead)
    assert not [name for name, module in model.named_modules() if isinstance(module, parallel)]
