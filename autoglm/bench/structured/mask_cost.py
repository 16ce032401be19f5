"""What the grammar mask adds to a step, timed apart from the model: filling the bitmask from each
constrained row's grammar state, and applying it to the logits, along the paths the neighbours took;
and what compiling a constraint costs, cold and from the cache."""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.structured_output import GrammarCache, GrammarState, build_token_bitmask
from autoglm.runner.token_bitmask import apply_token_bitmask, constrained_rows
from autoglm.structured_outputs import StructuredOutputsParams


@dataclass(frozen=True)
class MaskCost:
    """Median seconds per step of a batch of ``rows`` rows, ``constrained_rows`` of them constrained."""

    rows: int
    constrained_rows: int
    steps: int
    fill_s: float  # each constrained row's state writes its allowed tokens into the bitmask
    apply_s: float  # the bitmask, on the engine's device, applied to [rows, vocab] float32 logits

    @property
    def total_s(self) -> float:
        return self.fill_s + self.apply_s

    def to_dict(self) -> dict[str, float | int]:
        return {**asdict(self), "total_s": self.total_s}


@dataclass(frozen=True)
class CompileCost:
    cold_s: float  # a constraint the cache has not seen, the grammar compiler already loaded
    cache_hit_s: float


def _timed(action) -> tuple[float, object]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def measure_mask_cost(engine: LLMEngine, constraints: Sequence[StructuredOutputsParams],
                      outputs: Sequence[Sequence[int]], num_unconstrained: int) -> MaskCost:
    """Replay each neighbour's output through a fresh grammar state: per step, the bitmask of the
    batch (unconstrained rows after the constrained ones) filled and applied, then each state
    advanced by the token the neighbour took. Steps run while every neighbour still decodes."""
    states: list[GrammarState | None] = [engine.grammars.new_state(constraint) for constraint in constraints]
    rows = states + [None] * num_unconstrained
    logits = torch.randn(len(rows), engine.model_config.vocab_size, device=engine.device)
    fills, applies = [], []
    for step in range(min(len(output) for output in outputs)):
        fill_s, bitmask = _timed(lambda: build_token_bitmask(rows))
        apply_s, _ = _timed(lambda: _synchronized(apply_token_bitmask(logits, bitmask.to(engine.device),
                                                                      constrained_rows(bitmask))))
        fills.append(fill_s)
        applies.append(apply_s)
        for state, output in zip(states, outputs):
            state.accept(output[step])
    return MaskCost(len(rows), len(states), len(fills), statistics.median(fills), statistics.median(applies))


def _synchronized(tensor: torch.Tensor) -> torch.Tensor:
    """Wait for an accelerator's queued work, so that the timing includes it."""
    if tensor.device.type != "cpu":
        torch.accelerator.synchronize(tensor.device)
    return tensor


def measure_compile_cost(engine: LLMEngine, constraint: StructuredOutputsParams) -> CompileCost:
    """``constraint`` compiled by a cache of its own whose compiler another constraint loaded first,
    then asked for again."""
    cache = GrammarCache(engine.tokenizer, engine.model_config.vocab_size, engine.eos_token_ids)
    cache.compile(StructuredOutputsParams(regex="[a-z]"))
    cold_s, _ = _timed(lambda: cache.compile(constraint))
    hit_s, _ = _timed(lambda: cache.compile(constraint))
    return CompileCost(cold_s, hit_s)
