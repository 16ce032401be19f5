"""The tensor-parallel collectives: identities in one process, and what they say across 2 gloo ranks."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from autoglm.distributed import parallel_state
from tests.distributed.ranks import run_on_ranks


def test_one_process_is_rank_0_of_1_and_every_collective_is_the_identity() -> None:
    x = torch.arange(4.0)
    assert (parallel_state.tp_rank(), parallel_state.tp_size()) == (0, 1)
    for collective in (parallel_state.all_reduce, parallel_state.all_reduce_max, parallel_state.all_gather_last_dim,
                       parallel_state.broadcast):
        assert collective(x) is x


def test_a_group_larger_than_one_needs_torch_distributed_first() -> None:
    with pytest.raises(RuntimeError, match="init_process_group"):
        parallel_state.init_tensor_parallel(0, 2)
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        parallel_state.init_tensor_parallel(2, 2)


def collectives() -> dict[str, object]:
    """Each collective on a tensor that differs per rank, and how many collectives the timer saw."""
    rank = parallel_state.tp_rank()
    timed = []

    @contextlib.contextmanager
    def timer() -> Iterator[None]:
        timed.append(1)
        yield

    parallel_state.set_communication_timer(timer)
    mine = torch.tensor([[rank + 1.0, 10.0 * rank]])
    return {
        "rank": rank,
        "size": parallel_state.tp_size(),
        "sum": parallel_state.all_reduce(mine.clone()),
        "max": parallel_state.all_reduce_max(mine.clone()),
        "gathered": parallel_state.all_gather_last_dim(mine),
        "broadcast": parallel_state.broadcast(mine.clone(), src=1),
        "timed": len(timed),
    }


def test_collectives_across_two_ranks(tmp_path) -> None:
    ranks = run_on_ranks(collectives, tmp_path)
    assert [(r["rank"], r["size"]) for r in ranks] == [(0, 2), (1, 2)]
    for r in ranks:
        assert r["sum"].tolist() == [[3.0, 10.0]]
        assert r["max"].tolist() == [[2.0, 10.0]]
        assert r["gathered"].tolist() == [[1.0, 0.0, 2.0, 10.0]]
        assert r["broadcast"].tolist() == [[2.0, 10.0]]
        assert r["timed"] == 4
