"""What a CUDA device must keep free beside the KV pool, measured by a start-up profile run as vLLM does.

Weights are already loaded when the pool is sized; what the pool must not take is the memory
steps need on top: the activations of the largest step (``max_num_batched_tokens`` tokens, the
logits of ``max_num_seqs`` rows and their sampling at its costliest: top-k and top-p sort the whole
vocabulary, penalties count it, log-probs rank it) and, with decode graphs, the private pool the
captured graphs keep (the activations of the largest decode batch). Each is measured by running that forward once, before
the pool exists; attention layers not yet bound to a runner attend as one causal sequence, which on
CUDA allocates no more than the paged kernel does.
"""
from __future__ import annotations

import logging

import torch
from torch import nn

from autoglm.runner.kv_cache import default_kv_bytes
from autoglm.runner.sampler import Sampler, SamplingBatch
from autoglm.sampling_params import MAX_LOGPROBS
from autoglm.step_plan import RowSampling

logger = logging.getLogger(__name__)

# A row that takes every costly path of the sampler: a sort for top-k and top-p, a min-p pass, token
# counts for a penalty and the most log-probs a request may ask for.
COSTLIEST_ROW = RowSampling(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.1,
                            num_logprobs=MAX_LOGPROBS, prompt_token_ids=[0], output_token_ids=[0])


def run_profiled_step(model: nn.Module, num_tokens: int, num_sampled_rows: int, device: torch.device) -> torch.Tensor:
    """One forward of ``num_tokens`` tokens (one causal sequence) whose last ``num_sampled_rows`` positions
    are sampled with ``COSTLIEST_ROW``; returns the sampled ids (none for 0 rows: the forward alone, as a
    captured decode graph holds it)."""
    input_ids = torch.zeros(num_tokens, dtype=torch.long, device=device)
    hidden = model(input_ids, torch.arange(num_tokens, device=device))
    if not num_sampled_rows:
        return torch.empty(0, dtype=torch.long, device=device)
    logits = model.compute_logits(hidden[-num_sampled_rows:])
    batch = SamplingBatch.build([COSTLIEST_ROW] * num_sampled_rows, logits.shape[1], device)
    return Sampler()(logits, batch).token_ids


@torch.inference_mode()
def forward_peak_bytes(model: nn.Module, num_tokens: int, num_sampled_rows: int, device: torch.device) -> int:
    """Peak bytes one forward of ``num_tokens`` tokens and the sampling of ``num_sampled_rows`` of them allocate."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    held = torch.cuda.memory_allocated(device)
    run_profiled_step(model, num_tokens, num_sampled_rows, device)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - held
    torch.cuda.empty_cache()
    return peak


def step_reserve_bytes(model: nn.Module, device: torch.device, max_num_batched_tokens: int, max_num_seqs: int,
                       decode_graphs: bool) -> int:
    """Bytes to leave free beside the KV pool on ``device``: profiled on CUDA, 0 elsewhere (nothing to measure)."""
    if device.type != "cuda":
        return 0
    eager = forward_peak_bytes(model, max_num_batched_tokens, min(max_num_seqs, max_num_batched_tokens), device)
    graphs = forward_peak_bytes(model, max_num_seqs, 0, device) if decode_graphs else 0  # logits run eagerly
    logger.info("profile run: steps need %.1f MiB for activations and sampling, decode graphs %.1f MiB", eager / 2**20,
                graphs / 2**20)
    return eager + graphs


def fit_kv_budget(budget: int | None, free_bytes: int | None, reserve_bytes: int, full_need_bytes: int) -> int:
    """The KV pool's bytes: with no ``budget`` (``auto``) the default share of what stays free after the reserve;
    a set budget is refused where it would leave steps too little memory."""
    available = None if free_bytes is None else max(0, free_bytes - reserve_bytes)
    if budget is None:
        return default_kv_bytes(available, full_need_bytes)
    if available is not None and budget > available:
        raise ValueError(
            f"kv_cache_memory of {budget / 2**30:.2f} GiB does not fit: the device has {free_bytes / 2**30:.2f} GiB "
            f"free after the weights and steps need {reserve_bytes / 2**30:.2f} GiB of it; allowed: at most "
            f"{available / 2**30:.2f} GiB (or 'auto')"
        )
    return budget
