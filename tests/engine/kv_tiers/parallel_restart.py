"""The tiers of a tensor- or pipeline-parallel engine, checked end to end: a prefix restored from every rank's host
tier, then, after a restart, from every rank's block files, one of the worker's files damaged."""
from __future__ import annotations

from collections.abc import Callable

import torch

from autoglm import LLM
from tests.engine.kv_tiers.scenario import (BAD_BLOCK, PREFIX_BLOCKS, RECOMPUTE_TOLERANCE, SECOND_TURN, corrupt,
                                            first_turn_then_other_work, prefix_block_files, run_alone, tier)


def assert_restored_from_every_ranks_files(make_llm: Callable[[], LLM], reference, worker_rank: int) -> None:
    with make_llm() as llm:
        first_turn_then_other_work(llm.engine)
        logits, _ = run_alone(llm.engine, SECOND_TURN)
        assert tier(llm.engine, "host").hits == PREFIX_BLOCKS
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)
    with make_llm() as llm:  # a restart: the host tiers are empty, every rank's files are there
        num_ranks = len(llm.engine.kv_offload.disks)
        every_rank_files = [prefix_block_files(llm.engine, rank=rank) for rank in range(num_ranks)]
        assert all(path.is_file() for files in every_rank_files for path in files)
        corrupt(every_rank_files[worker_rank][BAD_BLOCK])
        logits, num_cached = run_alone(llm.engine, SECOND_TURN)
        disk = tier(llm.engine, "disk")
        assert (disk.blocks_dropped, disk.hits) == (1, BAD_BLOCK)
        assert not every_rank_files[worker_rank][BAD_BLOCK].exists()
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)
