"""The rounds of ``bench lora``: per rank one engine, and per round the same batch for the base model alone and
spread over each number of adapters, timed from submission to the last token."""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoglm.bench.lib.engine_run import bench_llm, prompt_token_ids
from autoglm.bench.lora.random_adapters import write_random_adapter
from autoglm.cli.settings import announce_model, config_from_args
from autoglm.llm import LLM
from autoglm.lora_request import LoRARequest
from autoglm.sampling_params import SamplingParams

BASE = 0  # the kind of round with no adapter


@dataclass(frozen=True)
class Kind:
    """What a round runs: the adapters its rows are spread over (0: the base model alone), and for the base
    model whether its decode steps are kept from the native one-call step, as steps with adapter rows are."""

    num_adapters: int
    layer_by_layer: bool = False


@dataclass(frozen=True)
class KindResult:
    """One kind of round at one rank, and each measured round's time."""

    rank: int
    kind: Kind
    output_tokens: int  # of one round
    rounds_s: list[float]

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "num_adapters": self.kind.num_adapters, "layer_by_layer": self.kind.layer_by_layer,
                "output_tokens": self.output_tokens, "rounds_s": self.rounds_s}


@dataclass(frozen=True)
class LoRARun:
    engine_settings: dict[str, Any]
    results: list[KindResult]


def run_round(llm: LLM, prompts: list[list[int]], adapters: list[LoRARequest], kind: Kind, output_len: int,
              native_rows: int) -> float:
    """Seconds to finish the batch, its rows given the kind's adapters in turn (none: the base model)."""
    params = SamplingParams(temperature=0.0, max_tokens=output_len, ignore_eos=True)
    chosen = adapters[:kind.num_adapters]
    requests = [chosen[index % len(chosen)] if chosen else None for index in range(len(prompts))]
    model = llm.engine.runner.model
    if kind.layer_by_layer:
        model.enable_native_decode(0)
    start = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False, lora_request=requests)
    elapsed = time.perf_counter() - start
    if kind.layer_by_layer:
        model.enable_native_decode(native_rows)
    return elapsed


def run_rank(args: argparse.Namespace, config, rank: int, folder: Path) -> list[KindResult]:
    most = max(args.num_adapters)
    settings = {"enable_lora": True, "max_loras": most, "max_cpu_loras": most, "max_lora_rank": rank}
    llm = bench_llm(config.model_copy(update=settings))
    targets = llm.engine.runner.model.lora.targets
    adapters = [LoRARequest(f"rank{rank}-{index}", index + 1,
                            str(write_random_adapter(folder / f"rank{rank}-{index}", targets, rank, seed=index)))
                for index in range(most)]
    rng = random.Random(rank)
    token_ids = prompt_token_ids(llm.engine)
    prompts = [rng.choices(token_ids, k=args.input_len) for _ in range(args.batch_size)]
    native = llm.engine.device.type == "cpu" and llm.engine.runner.model.native_decode is not None
    native_rows = config.cpu_decode_step_max_rows
    kinds = [Kind(BASE), *([Kind(BASE, layer_by_layer=True)] if native else []),
             *(Kind(count) for count in args.num_adapters)]
    for kind in kinds:  # warm-up: every adapter loaded, every path taken once
        run_round(llm, prompts, adapters, kind, args.output_len, native_rows)
    rounds: dict[Kind, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            rounds[kind].append(run_round(llm, prompts, adapters, kind, args.output_len, native_rows))
    llm.close()
    output_tokens = args.batch_size * args.output_len
    return [KindResult(rank, kind, output_tokens, rounds[kind]) for kind in kinds]


def run_lora_bench(args: argparse.Namespace) -> LoRARun:
    config = config_from_args(args)
    announce_model(config)
    results = []
    with tempfile.TemporaryDirectory(prefix="autoglm-lora-bench-") as folder:
        for rank in args.ranks:
            print(f"rank {rank}: {args.rounds} rounds of {args.batch_size} requests, for the base model and "
                  f"over {', '.join(map(str, args.num_adapters))} adapters", flush=True)
            results += run_rank(args, config, rank, Path(folder))
    return LoRARun(config.model_dump(), results)
