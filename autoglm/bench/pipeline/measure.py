"""One ``bench pp`` run: each engine in turn (never both in memory), a warm-up round and then the measured one."""
from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Any

import torch

from autoglm.bench.lib.engine_run import bench_llm, prompt_token_ids
from autoglm.cli.settings import announced_config
from autoglm.config import AutoGLMConfig
from autoglm.sampling_params import SamplingParams

WARM_UP_PROMPTS = 2
PROMPT_SEED = 0  # the same prompts on both sides


@dataclass(frozen=True)
class PipelineSide:
    """One engine's measured round."""

    num_stages: int
    torch_threads: int  # of the engine's own process: under pipeline parallelism, of each stage
    elapsed_s: float
    prompt_tokens: int
    output_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "output_tokens_per_s": self.output_tokens / self.elapsed_s,
                "total_tokens_per_s": (self.prompt_tokens + self.output_tokens) / self.elapsed_s}


@dataclass(frozen=True)
class PipelineRun:
    engine_settings: dict[str, Any]
    sides: list[PipelineSide]  # one process first
    same_tokens: bool  # both engines gave every request the same greedy tokens


def _run_side(config: AutoGLMConfig, num_stages: int, args: argparse.Namespace) -> tuple[PipelineSide, list]:
    """The side's figures, and each request's output token ids."""
    llm = bench_llm(config.model_copy(update={"pipeline_parallel_size": num_stages}))
    try:
        rng = random.Random(PROMPT_SEED)
        token_ids = prompt_token_ids(llm.engine)
        prompts = [rng.choices(token_ids, k=args.input_len) for _ in range(args.num_prompts)]
        params = SamplingParams(temperature=0.0, max_tokens=args.output_len, ignore_eos=True)
        llm.generate(prompts[:WARM_UP_PROMPTS], params, use_tqdm=False)
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        elapsed_s = time.perf_counter() - start
        side = PipelineSide(num_stages, torch.get_num_threads(), elapsed_s, args.num_prompts * args.input_len,
                            sum(len(output.outputs[0].token_ids) for output in outputs))
    finally:
        llm.close()
    print(f"{num_stages} stage(s): {side.output_tokens} output tokens in {elapsed_s:.1f} s", flush=True)
    return side, [output.outputs[0].token_ids for output in outputs]


def run_pipeline_bench(args: argparse.Namespace) -> PipelineRun:
    config = announced_config(args)
    if config.pipeline_parallel_size != 1:
        raise ValueError(f"bench pp compares one process with --stages stages: leave pipeline_parallel_size at 1 "
                         f"(got {config.pipeline_parallel_size}) and give --stages {config.pipeline_parallel_size}")
    if args.stages < 2:
        raise ValueError(f"--stages must be at least 2 to compare a pipeline with one process, got {args.stages}")
    alone, alone_tokens = _run_side(config, 1, args)
    staged, staged_tokens = _run_side(config, args.stages, args)
    return PipelineRun(config.model_dump(), [alone, staged], alone_tokens == staged_tokens)
