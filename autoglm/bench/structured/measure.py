"""One round of ``bench structured``: B unconstrained greedy requests and K neighbours submitted
together to one engine, each step timed.

Only steps in which every request of the round decodes count: prefills and the tail after the
first request finishes would measure a different batch in the two kinds of round.
"""
from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoglm.bench.lib.engine_run import bench_llm, prompt_token_ids
from autoglm.bench.structured.constraints import json_constraint, neighbour_constraints, regex_constraint
from autoglm.bench.structured.mask_cost import CompileCost, MaskCost, measure_compile_cost, measure_mask_cost
from autoglm.cli.settings import announce_model, config_from_args
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import InvalidRequestError
from autoglm.sampling_params import RequestOutputKind, SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams


@dataclass(frozen=True)
class RoundShape:
    """What every round submits: its unconstrained requests and neighbours, and their lengths."""

    num_unconstrained: int  # B: the requests whose decode speed is measured
    num_neighbours: int  # K: constrained in one kind of round, unconstrained in the other
    input_len: int
    output_len: int


@dataclass(frozen=True)
class RoundResult:
    constrained: bool  # whether the neighbours decoded under a constraint
    full_steps: int  # steps in which every request of the round decoded
    full_steps_s: float  # their time
    neighbour_outputs: list[list[int]]  # each neighbour's output token ids

    @property
    def step_s(self) -> float:
        return self.full_steps_s / self.full_steps

    def to_dict(self, shape: RoundShape) -> dict[str, object]:
        return {"constrained": self.constrained, "full_steps": self.full_steps, "full_steps_s": self.full_steps_s,
                "unconstrained_tokens_per_s": shape.num_unconstrained / self.step_s}


def _decoding_all(engine: LLMEngine, request_ids: Sequence[str]) -> bool:
    """Every request is unfinished and past its prompt, so the next step decodes each once."""
    return all(request_id in engine.requests
               and engine.requests[request_id].completions[0].seq.num_output_tokens >= 1
               for request_id in request_ids)


def run_round(engine: LLMEngine, shape: RoundShape, token_ids: Sequence[int], name: str,
              constraints: Sequence[StructuredOutputsParams] | None) -> RoundResult:
    """Submit the round's requests (fresh random prompts, seeded by ``name``) and step the engine
    until all finish. ``constraints``: one per neighbour, or None for unconstrained neighbours."""
    rng = random.Random(name)
    count = shape.num_unconstrained + shape.num_neighbours
    neighbour_ids = [f"{name}-neighbour-{index}" for index in range(shape.num_neighbours)]
    request_ids = [f"{name}-{index}" for index in range(shape.num_unconstrained)] + neighbour_ids
    for index, request_id in enumerate(request_ids):
        neighbour = index - shape.num_unconstrained
        constraint = None if constraints is None or neighbour < 0 else constraints[neighbour]
        params = SamplingParams(temperature=0.0, max_tokens=shape.output_len, ignore_eos=True,
                                output_kind=RequestOutputKind.FINAL_ONLY, structured_outputs=constraint)
        engine.add_request(request_id, rng.choices(token_ids, k=shape.input_len), params)
    full_steps, full_steps_s = 0, 0.0
    finals = {}
    while engine.has_unfinished_requests():
        full = _decoding_all(engine, request_ids)
        start = time.perf_counter()
        outputs = engine.step()
        elapsed = time.perf_counter() - start
        if full:
            full_steps += 1
            full_steps_s += elapsed
        finals.update((output.request_id, output) for output in outputs if output.finished)
    if len(finals) != count or not full_steps:
        raise RuntimeError(f"round {name}: {len(finals)} of {count} requests finished, {full_steps} steps decoded "
                           "all of them; raise --output-len")
    return RoundResult(constraints is not None, full_steps, full_steps_s,
                       [list(finals[request_id].outputs[0].token_ids) for request_id in neighbour_ids])


@dataclass(frozen=True)
class StructuredRun:
    """Every measured round in order, the mask's cost a step and each constraint's compile cost, by kind."""

    shape: RoundShape
    engine_settings: dict[str, Any]
    rounds: list[RoundResult]
    mask: MaskCost
    compiled: dict[str, CompileCost]


def run_structured_bench(args: argparse.Namespace) -> StructuredRun:
    """One unmeasured round of each kind, then ``--rounds`` of each in turn, the mask and the compiles."""
    config = config_from_args(args)
    batch = args.num_unconstrained + args.num_neighbours
    if batch > config.max_num_seqs:
        raise InvalidRequestError(f"--num-unconstrained + --num-neighbours is {batch} but --max-num-seqs is "
                                  f"{config.max_num_seqs}: every request of a round must decode in one batch")
    announce_model(config)
    engine = bench_llm(config).engine
    shape = RoundShape(args.num_unconstrained, args.num_neighbours, args.input_len, args.output_len)
    constraints = neighbour_constraints(args.num_neighbours, args.output_len)
    token_ids = prompt_token_ids(engine)
    print(f"{args.rounds} rounds of each kind: {shape.num_unconstrained} unconstrained requests beside "
          f"{shape.num_neighbours} neighbours, unconstrained and constrained in turn", flush=True)
    for kind in (None, constraints):  # warm-up, the constraints compiled here
        run_round(engine, shape, token_ids, f"warm-up-{kind is not None}", kind)
    rounds = []
    for index in range(args.rounds):
        for kind in (None, constraints):
            rounds.append(run_round(engine, shape, token_ids, f"round-{index}-{kind is not None}", kind))
    constrained = [entry for entry in rounds if entry.constrained]
    mask = measure_mask_cost(engine, constraints, constrained[-1].neighbour_outputs, shape.num_unconstrained)
    compiled = {"JSON schema": measure_compile_cost(engine, json_constraint(args.output_len)),
                "regex": measure_compile_cost(engine, regex_constraint(args.output_len))}
    return StructuredRun(shape, config.model_dump(), rounds, mask, compiled)
