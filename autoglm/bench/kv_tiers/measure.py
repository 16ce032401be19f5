"""Time to first token of a long shared prefix whose KV comes from each place it can come from.

A turn is the prefix and a fresh question, asking for one token, run alone. Between turns, distinct prompts as long
as the prefix run (the other work), which evict it from a pool sized for one turn: its blocks then come back from
host memory, or, with a host tier too small to keep the other work as well, from disk. The same prefix is also
measured recomputed (prefix caching off), still in the pool (the in-memory hit every tier aims at), and read from
disk by an engine started after the one that wrote it.
"""
from __future__ import annotations

import random
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

from autoglm.bench.lib.engine_run import bench_llm
from autoglm.config import AutoGLMConfig
from autoglm.llm import LLM
from autoglm.runner.kv_cache import bytes_per_block
from autoglm.sampling_params import SamplingParams

RECOMPUTED, POOL_HIT, HOST_TIER, DISK_TIER, AFTER_RESTART = (
    "recomputed", "in the pool", "host memory tier", "disk tier", "disk tier, after a restart")
_ONE_TOKEN = SamplingParams(max_tokens=1, temperature=0.0)


@dataclass(frozen=True)
class Workload:
    prefix: list[int]
    question_len: int
    vocab: range  # token ids the prompts draw from
    seed: int

    def turn(self, index: int) -> list[int]:
        """The prefix and the ``index``-th question."""
        rng = random.Random(f"{self.seed}-question-{index}")
        return self.prefix + [rng.choice(self.vocab) for _ in range(self.question_len)]

    def other_work(self, index: int, count: int) -> list[list[int]]:
        """``count`` distinct prompts as long as a turn, none sharing a block with the prefix."""
        rng = random.Random(f"{self.seed}-other-{index}")
        return [[rng.choice(self.vocab) for _ in range(len(self.prefix) + self.question_len)] for _ in range(count)]


@dataclass(frozen=True)
class Measurement:
    ttft_s: list[float]
    restored_blocks: dict[str, int]  # per tier, over every timed turn

    @property
    def median_ttft_s(self) -> float:
        return median(self.ttft_s)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "median_ttft_s": self.median_ttft_s}


def measure_kv_tiers(config: AutoGLMConfig, workload: Workload, trials: int) -> dict[str, Measurement]:
    block_size = config.block_size
    turn_tokens = len(workload.turn(0))
    one_turn = {"max_context_len": turn_tokens + 1, "max_num_batched_tokens": turn_tokens + 1}
    probe = _engine(config, **one_turn).engine
    block = bytes_per_block(probe.runner.model, block_size, probe.dtype, probe.runner.kv_pool.format)
    turn_blocks = -(-turn_tokens // block_size)
    small_pool = {**one_turn, "kv_cache_memory": (turn_blocks + 2) * block}  # one turn, and nothing more
    results = {RECOMPUTED: _timed_turns(_engine(config, enable_prefix_caching=False, **small_pool), workload, trials),
               POOL_HIT: _timed_turns(_engine(config, **small_pool), workload, trials)}
    # The host tier keeps the prefix and two other prompts; four push the prefix down to disk.
    host_only = _engine(config, kv_offload_bytes=4 * turn_blocks * block, **small_pool)
    results[HOST_TIER] = _timed_turns(host_only, workload, trials, other_prompts=2)
    with tempfile.TemporaryDirectory(prefix="autoglm-bench-kv-tiers-") as folder:
        tiered = {**small_pool, "kv_offload_bytes": 2 * turn_blocks * block, "kv_disk_path": str(Path(folder)),
                  "kv_disk_bytes": 64 * turn_blocks * (block + 4096)}
        writer = _engine(config, **tiered)
        results[DISK_TIER] = _timed_turns(writer, workload, trials, other_prompts=4)
        writer.engine.close()
        results[AFTER_RESTART] = _restarted_turns(config, tiered, workload, trials)
    return results


def _engine(config: AutoGLMConfig, **settings: Any) -> LLM:
    return bench_llm(config.model_copy(update=settings))


def _turn(llm: LLM, prompt: list[int]) -> float:
    started = time.perf_counter()
    llm.generate([prompt], _ONE_TOKEN, use_tqdm=False)
    return time.perf_counter() - started


def _restored(llm: LLM) -> dict[str, int]:
    return {tier.tier: tier.hits for tier in llm.engine.get_stats().kv_tiers}


def _timed_turn(llm: LLM, prompt: list[int], restored: dict[str, int]) -> float:
    """One turn's time to first token; the blocks each tier restored for it are added to ``restored``."""
    before = _restored(llm)
    seconds = _turn(llm, prompt)
    for tier, count in _restored(llm).items():
        restored[tier] = restored.get(tier, 0) + count - before[tier]
    return seconds


def _timed_turns(llm: LLM, workload: Workload, trials: int, other_prompts: int = 0) -> Measurement:
    """The first turn computes the prefix; each timed turn follows ``other_prompts`` prompts of other work."""
    _turn(llm, workload.turn(0))
    ttft, restored = [], {}
    for trial in range(1, trials + 1):
        for prompt in workload.other_work(trial, other_prompts):
            _turn(llm, prompt)
        ttft.append(_timed_turn(llm, workload.turn(trial), restored))
    return Measurement(ttft, restored)


def _restarted_turns(config: AutoGLMConfig, tiered: dict[str, Any], workload: Workload, trials: int) -> Measurement:
    """Each trial a new engine on the disk tier's folder, warmed up on a short prompt, then one turn."""
    ttft, restored = [], {}
    for trial in range(1, trials + 1):
        llm = _engine(config, **tiered)
        (warm_up,) = workload.other_work(-trial, 1)
        _turn(llm, warm_up[: config.block_size])  # shorter than a block's hash: nothing of it goes to disk
        ttft.append(_timed_turn(llm, workload.turn(trials + trial), restored))
    return Measurement(ttft, restored)
