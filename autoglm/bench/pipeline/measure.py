"""One ``bench pp`` run: both engines alive in one process, measured in alternate rounds after a warm-up round
each, so that a shared machine's drift falls on both alike; each is quoted by its quickest round.

Each round runs with the torch threads its engine was built for: one process's engine with every core,
the pipeline's own process (its last stage) with its share, as each of its workers has.
"""
from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Any

import torch

from autoglm.bench.lib.engine_run import bench_llm, prompt_token_ids
from autoglm.cli.settings import announced_config
from autoglm.engine.tensor_parallel.process_group import GroupSettings, rank_threads
from autoglm.llm import LLM
from autoglm.sampling_params import SamplingParams

WARM_UP_PROMPTS = 2
PROMPT_SEED = 0


@dataclass(frozen=True)
class PipelineSide:
    """One engine's quickest round."""

    num_stages: int
    torch_threads: int  # of each process
    elapsed_s: float
    prompt_tokens: int
    output_tokens: int
    rounds_s: list[float]  # every measured round's time, in order

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "output_tokens_per_s": self.output_tokens / self.elapsed_s,
                "total_tokens_per_s": (self.prompt_tokens + self.output_tokens) / self.elapsed_s}


@dataclass(frozen=True)
class PipelineRun:
    engine_settings: dict[str, Any]
    sides: list[PipelineSide]  # one process first
    same_tokens: bool  # both engines gave every request the same greedy tokens


@dataclass
class _Engine:
    llm: LLM
    num_stages: int
    threads: int
    rounds_s: list[float]
    token_ids: list[list[int]] | None = None

    def run(self, prompts: list[list[int]], params: SamplingParams) -> float:
        torch.set_num_threads(self.threads)
        start = time.perf_counter()
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        elapsed_s = time.perf_counter() - start
        self.token_ids = [output.outputs[0].token_ids for output in outputs]
        return elapsed_s


def run_pipeline_bench(args: argparse.Namespace) -> PipelineRun:
    config = announced_config(args)
    if args.stages < 2:
        raise ValueError(f"--stages must be at least 2 to compare a pipeline with one process, got {args.stages}")
    if config.pipeline_parallel_size != 1:
        raise ValueError(f"bench pp compares one process with --stages stages: leave pipeline_parallel_size at 1 "
                         f"(got {config.pipeline_parallel_size}) and give --stages {config.pipeline_parallel_size}")
    cores = torch.get_num_threads() if config.num_threads is None else config.num_threads
    share = rank_threads(config.num_threads, GroupSettings("gloo", "", args.stages, "cpu"))
    engines = []
    # One process's engine first: a pipeline's stage is its process's from the moment it joins, and every model
    # built after it would be built as that stage.
    for num_stages in (1, args.stages):
        llm = bench_llm(config.model_copy(update={"pipeline_parallel_size": num_stages}))
        engines.append(_Engine(llm, num_stages, cores if num_stages == 1 else share, []))
    try:
        rng = random.Random(PROMPT_SEED)
        token_ids = prompt_token_ids(engines[0].llm.engine)
        prompts = [rng.choices(token_ids, k=args.input_len) for _ in range(args.num_prompts)]
        params = SamplingParams(temperature=0.0, max_tokens=args.output_len, ignore_eos=True)
        for engine in engines:
            engine.run(prompts[:WARM_UP_PROMPTS], params)
        for index in range(args.rounds):
            for engine in engines:
                engine.rounds_s.append(engine.run(prompts, params))
                print(f"round {index + 1}, {engine.num_stages} stage(s): {engine.rounds_s[-1]:.1f} s", flush=True)
    finally:
        for engine in engines:
            engine.llm.close()
    sides = [PipelineSide(engine.num_stages, engine.threads, min(engine.rounds_s), args.num_prompts * args.input_len,
                          sum(map(len, engine.token_ids)), engine.rounds_s) for engine in engines]
    return PipelineRun(config.model_dump(), sides, engines[0].token_ids == engines[1].token_ids)
