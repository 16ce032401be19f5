"""The issue's scenario scaled down: a shared prefix the pool cannot keep while other prompts run between turns.

Blocks of 4 tokens, a pool of 16 blocks, a 40-token shared prefix (10 blocks) and three distinct 60-token prompts
between the turns, each of which evicts every cached block. A request runs alone, so its logits depend only on the
KV it reads.
"""
from __future__ import annotations

import itertools
import random
from pathlib import Path

import torch

from autoglm import LLM, SamplingParams
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sched.block_manager import hash_block, salt_bytes
from autoglm.engine.sequence import TenantTag
from autoglm.runner.kv_cache import bytes_per_block

BLOCK_SIZE = 4
POOL_BLOCKS = 16
_rng = random.Random(0)
PREFIX = [_rng.randrange(3, 200) for _ in range(40)]
PREFIX_BLOCKS = len(PREFIX) // BLOCK_SIZE
OTHER_PROMPTS = [[_rng.randrange(3, 200) for _ in range(60)] for _ in range(3)]
FIRST_TURN = PREFIX + [_rng.randrange(3, 200) for _ in range(5)]
SECOND_TURN = PREFIX + [_rng.randrange(3, 200) for _ in range(6)]
BAD_BLOCK = 7  # of the prefix, whose file a test damages: blocks 0..6 are restored, 7 on are recomputed
RECOMPUTE_TOLERANCE = 1e-5  # float32: the same values summed in other chunks
_request_ids = itertools.count()


def block_bytes(model_dir: Path, kv_cache_dtype: str = "auto") -> int:
    """One block's K and V across every layer of the tiny model, computed in float32, stored as ``kv_cache_dtype``."""
    runner = make_llm(model_dir, kv_cache_dtype=kv_cache_dtype).engine.runner
    return bytes_per_block(runner.model, BLOCK_SIZE, torch.float32, runner.kv_pool.format)


def make_llm(model_dir: Path, **settings) -> LLM:
    return LLM(model=str(model_dir), dtype="float32", block_size=BLOCK_SIZE, max_context_len=128, max_num_seqs=4,
               **settings)


def tiered_llm(model_dir: Path, host_blocks: int, disk_path: Path | None = None, disk_blocks: int = 200,
               **settings) -> LLM:
    """A pool too small for the prefix and the other prompts, a host tier of ``host_blocks`` blocks and, with
    ``disk_path``, a disk tier of about ``disk_blocks`` block files."""
    size = block_bytes(model_dir, settings.get("kv_cache_dtype", "auto"))
    disk = {} if disk_path is None else {"kv_disk_path": str(disk_path), "kv_disk_bytes": disk_blocks * (size + 512)}
    return make_llm(model_dir, kv_cache_memory=POOL_BLOCKS * size, kv_offload_bytes=host_blocks * size, **disk,
                    **settings)


def run_alone(engine: LLMEngine, prompt: list[int], tenant: TenantTag | None = None) -> tuple[torch.Tensor, int]:
    """The logits of the prompt's last token and how many of its tokens came from a cache (any tier)."""
    seen: list[torch.Tensor] = []
    model = engine.runner.model
    compute_logits = model.compute_logits

    def recorded(hidden: torch.Tensor) -> torch.Tensor:
        seen.append(compute_logits(hidden))
        return seen[-1]

    model.compute_logits = recorded
    try:
        engine.add_request(str(next(_request_ids)), prompt, SamplingParams(max_tokens=1, temperature=0.0),
                           tenant=tenant)
        while engine.has_unfinished_requests():
            for output in engine.step():
                if output.finished:
                    num_cached = output.num_cached_tokens
    finally:
        model.compute_logits = compute_logits
    engine.block_manager.check_invariants()
    assert engine.block_manager.num_referenced_blocks() == 0, "a finished request left blocks referenced"
    if engine.kv_offload is not None:
        engine.kv_offload.check_invariants()
    return seen[-1][-1], num_cached


def first_turn_then_other_work(engine: LLMEngine, tenant: TenantTag | None = None) -> None:
    """The prefix computed once, then evicted from the pool by the other prompts."""
    run_alone(engine, FIRST_TURN, tenant)
    for prompt in OTHER_PROMPTS:
        run_alone(engine, prompt)


def tier(engine: LLMEngine, name: str):
    return next(stats for stats in engine.get_stats().kv_tiers if stats.tier == name)


def prefix_block_files(engine: LLMEngine, tenant: TenantTag | None = None, rank: int | None = None) -> list[Path]:
    """Where the disk tier keeps (or would keep) each block of the prefix, in order: the engine's process's files,
    or those of ``rank``."""
    salt = b"" if tenant is None else salt_bytes(tenant.salt)
    offload = engine.kv_offload
    disk = offload.disk if rank is None else offload.disks[rank]
    paths, parent = [], b""
    for index in range(PREFIX_BLOCKS):
        parent = hash_block(parent, PREFIX[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE], salt)
        paths.append(disk.path(disk.key(parent)))
    return paths


def corrupt(path: Path) -> None:
    """Flip a bit of the file's payload."""
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x40
    path.write_bytes(bytes(data))
