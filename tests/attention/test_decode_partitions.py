"""When decode rows are split into key partitions: decided from shapes alone, the same for every replay of a graph."""
from __future__ import annotations

import pytest
import torch

from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.triton_paged_attention import (
    DECODE_PARTITION_TOKENS, TARGET_DECODE_PROGRAMS, decode_partitions,
)
from autoglm.runner.decode_buffers import DecodeBuffers

BLOCK_SIZE = 16


def padded_decode_buffers(num_rows: int, max_blocks: int) -> DecodeBuffers:
    """Decode buffers as padded decode holds them: ``num_rows`` rows, block tables ``max_blocks`` wide."""
    return DecodeBuffers.allocate(num_rows, max_blocks, BLOCK_SIZE, scratch_block=0, device=torch.device("cpu"))


def decode_step(num_rows: int, max_blocks: int) -> AttentionMetadata:
    return padded_decode_buffers(num_rows, max_blocks).metadata(num_rows, [1] * num_rows)


def test_a_table_within_one_partition_runs_in_one_pass():
    assert decode_partitions(decode_step(1, DECODE_PARTITION_TOKENS // BLOCK_SIZE), num_kv_heads=2) == 1


@pytest.mark.parametrize("max_blocks, partitions", [(DECODE_PARTITION_TOKENS // BLOCK_SIZE + 1, 2),
                                                    (4 * DECODE_PARTITION_TOKENS // BLOCK_SIZE, 4)])
def test_a_few_rows_split_the_whole_table_capacity(max_blocks, partitions):
    assert decode_partitions(decode_step(1, max_blocks), num_kv_heads=2) == partitions


def test_rows_enough_to_fill_the_gpu_run_in_one_pass():
    max_blocks = 4 * DECODE_PARTITION_TOKENS // BLOCK_SIZE
    rows = TARGET_DECODE_PROGRAMS // 2
    assert decode_partitions(decode_step(rows, max_blocks), num_kv_heads=2) == 1
    assert decode_partitions(decode_step(rows - 1, max_blocks), num_kv_heads=2) == 4


def test_the_choice_ignores_context_lengths_so_a_captured_graph_replays_its_grid():
    buffers = padded_decode_buffers(2, 4 * DECODE_PARTITION_TOKENS // BLOCK_SIZE)
    captured = buffers.metadata(2, [1, 1])  # as padded decode captures a graph
    replayed = buffers.metadata(2, [3 * DECODE_PARTITION_TOKENS, 5])
    assert decode_partitions(captured, num_kv_heads=2) == decode_partitions(replayed, num_kv_heads=2) == 4
