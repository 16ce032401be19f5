"""One run of ``bench embed``: for each input length, the same batch of random token ids embedded by the engine
and by transformers' base model, each timed over the rounds."""
from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from autoglm.bench.lib.arguments import chosen_baseline
from autoglm.bench.lib.engine_run import bench_llm
from autoglm.cli.settings import announce_model, config_from_args
from autoglm.llm import LLM
from autoglm.models.parameter_count import count_parameters


@dataclass(frozen=True)
class LengthResult:
    """The rounds' seconds at one input length, the engine's and the baseline's (None: not run), and the least
    cosine between the two's embeddings of one input."""

    input_len: int
    engine_s: list[float]
    baseline_s: list[float] | None
    min_cosine: float | None


@dataclass(frozen=True)
class EmbedRun:
    engine_settings: dict[str, Any]
    model: dict[str, Any]  # its size, as the results file records it
    lengths: list[LengthResult]


def run_embed_bench(args: argparse.Namespace) -> EmbedRun:
    config = config_from_args(args)
    announce_model(config)
    llm = bench_llm(config)
    pooling = llm.engine.pooling_model
    if pooling is None or pooling.kind != "embed" or pooling.pooling_type != "LAST":
        raise ValueError("bench embed measures last-token embeddings: give an embedding model (or a decoder) with "
                         "runner 'pooling' and pooling_type LAST")
    baseline = _transformers_embedder(llm) if chosen_baseline(args) else None
    rng = random.Random(0)
    vocab_size = llm.engine.model_config.vocab_size
    lengths = []
    for input_len in (args.short_len, args.long_len):
        batch = [[rng.randrange(vocab_size) for _ in range(input_len)] for _ in range(args.batch_size)]
        print(f"{args.rounds} rounds of {args.batch_size} inputs of {input_len} tokens", flush=True)
        engine_s, engine_vectors = _timed(lambda: torch.stack([torch.tensor(output.embedding) for output in
                                                               llm.embed(batch, use_tqdm=False)]), args.rounds)
        if baseline is None:
            lengths.append(LengthResult(input_len, engine_s, None, None))
            continue
        baseline_s, baseline_vectors = _timed(lambda: baseline(batch), args.rounds)
        cosines = torch.nn.functional.cosine_similarity(engine_vectors, baseline_vectors.float(), dim=1)
        lengths.append(LengthResult(input_len, engine_s, baseline_s, float(cosines.min())))
    model_config = llm.engine.model_config
    model = {"parameters": count_parameters(llm.engine.runner.model), "layers": model_config.num_hidden_layers,
             "hidden_size": model_config.hidden_size, "dtype": str(llm.engine.dtype).removeprefix("torch.")}
    return EmbedRun(config.model_dump(), model, lengths)


def _timed(embed: Callable[[], torch.Tensor], rounds: int) -> tuple[list[float], torch.Tensor]:
    """Seconds of each measured round, after one unmeasured; and the last round's embeddings."""
    vectors = embed()
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        vectors = embed()
        seconds.append(time.perf_counter() - started)
    return seconds, vectors


def _transformers_embedder(llm: LLM) -> Callable[[list[list[int]]], torch.Tensor]:
    """transformers' base model in the dtype the engine computes in: the last token's final hidden state of each
    input (all of one length, so no padding), normalised."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(llm.engine.model_path, dtype=llm.engine.dtype).to(llm.engine.device).eval()

    @torch.inference_mode()
    def embed(batch: list[list[int]]) -> torch.Tensor:
        hidden = model(torch.tensor(batch, device=llm.engine.device)).last_hidden_state[:, -1]
        return torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
    return embed
