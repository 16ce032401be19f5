"""The transformers side of a benchmark: what its users do, ``model.generate`` on static batches.

Requests go in arrival order in batches of :data:`BATCH_SIZE`, left-padded with an attention
mask, greedy. A batch runs until its longest request is done, so shorter requests in it
generate tokens nobody asked for; only each request's own ``max_tokens`` count as output.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, PreTrainedModel

from autoglm.bench.lib.sampling import BenchSampling
from autoglm.bench.lib.workloads import BenchRequest, Workload
from autoglm.bench.results.throughput import ThroughputResult
from autoglm.platforms import synchronize
from autoglm.progress import show_progress

BATCH_SIZE = 16
PAD_TOKEN_ID = 0  # padded positions are masked out, so which id fills them does not matter


def load_transformers_model(model_dir: str | Path, dtype: torch.dtype,
                            device: torch.device = torch.device("cpu")) -> PreTrainedModel:
    """The checkpoint in transformers, on the device the engine ran on, so both sides share the hardware."""
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(device).eval()


def left_padded_batch(requests: list[BenchRequest]) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention mask with every prompt right-aligned, as decoder-only batching needs."""
    width = max(len(request.prompt_token_ids) for request in requests)
    input_ids = torch.full((len(requests), width), PAD_TOKEN_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(requests), width), dtype=torch.long)
    for row, request in enumerate(requests):
        length = len(request.prompt_token_ids)
        input_ids[row, width - length:] = torch.tensor(request.prompt_token_ids)
        attention_mask[row, width - length:] = 1
    return input_ids, attention_mask


def generate_batch(model: PreTrainedModel, requests: list[BenchRequest],
                   sampling: BenchSampling = BenchSampling()) -> None:
    """Generate for one static batch until its longest request is done."""
    input_ids, attention_mask = (tensor.to(model.device) for tensor in left_padded_batch(requests))
    max_new_tokens = max(request.max_tokens for request in requests)
    with torch.inference_mode():
        sequences = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            **sampling.generate_kwargs(),
            eos_token_id=None,  # never stop early: both sides must generate the same tokens
            pad_token_id=PAD_TOKEN_ID,
        )
    generated = sequences.shape[1] - input_ids.shape[1]
    if generated != max_new_tokens:
        raise RuntimeError(
            f"transformers stopped a batch after {generated} of {max_new_tokens} new tokens; "
            "the throughput comparison would be unfair"
        )


def run_transformers_workload(
    model: PreTrainedModel, workload: Workload, batch_size: int = BATCH_SIZE,
    sampling: BenchSampling = BenchSampling(),
) -> ThroughputResult:
    batches = [workload.requests[i:i + batch_size] for i in range(0, len(workload.requests), batch_size)]
    start = time.perf_counter()
    for batch in tqdm(batches, desc=f"{workload.name} / transformers", unit="batch", disable=not show_progress()):
        generate_batch(model, batch, sampling)
    synchronize(model.device)
    elapsed_s = time.perf_counter() - start
    return ThroughputResult(
        num_requests=len(workload.requests),
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        elapsed_s=elapsed_s,
    )
