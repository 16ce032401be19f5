"""A block file that is corrupted, truncated or another engine's (another dtype) is refused on read, removed and
counted; its block and those after it are recomputed, the blocks before it still restored."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from autoglm.runner.kv_tiers.block_file import block_file_header
from tests.engine.kv_tiers.scenario import (BAD_BLOCK, BLOCK_SIZE, PREFIX_BLOCKS, RECOMPUTE_TOLERANCE,
                                            SECOND_TURN, corrupt, first_turn_then_other_work, prefix_block_files,
                                            run_alone, tier, tiered_llm)


def corrupted(path: Path, engine) -> None:
    corrupt(path)


def truncate(path: Path, engine) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def foreign(path: Path, engine) -> None:
    """The same block as a bfloat16 engine of the same model would write it, under this engine's name for it."""
    identity = dataclasses.replace(engine.kv_offload.identity, dtype="bfloat16")
    payload = path.read_bytes()[-engine.kv_offload.area.slot_bytes :]
    path.write_bytes(block_file_header(identity.key(b"any block"), identity.header, payload) + payload)


@pytest.mark.parametrize("damage", [corrupted, truncate, foreign])
def test_a_bad_block_file_is_dropped_and_its_blocks_recomputed(model_dir, reference, tmp_path,
                                                               damage: Callable[[Path, object], None]):
    folder = tmp_path / "blocks"
    writer = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    first_turn_then_other_work(writer)
    writer.close()
    reader = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    bad_file = prefix_block_files(reader)[BAD_BLOCK]
    damage(bad_file, reader)
    logits, num_cached = run_alone(reader, SECOND_TURN)
    disk = tier(reader, "disk")
    assert (disk.blocks_dropped, disk.hits) == (1, BAD_BLOCK)
    assert num_cached == BAD_BLOCK * BLOCK_SIZE < PREFIX_BLOCKS * BLOCK_SIZE
    assert not bad_file.exists()
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)
