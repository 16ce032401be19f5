"""What a CUDA device must keep free beside the KV pool, measured by a start-up profile run as vLLM does.

Weights are already loaded when the pool is sized; what the pool must not take is the memory
steps need on top: the activations of the largest step (``max_num_batched_tokens`` tokens, the
logits of ``max_num_seqs`` rows) and, with decode graphs, the private pool the captured graphs keep
(the activations of the largest decode batch). Each is measured by running that forward once, before
the pool exists; attention layers not yet bound to a runner attend as one causal sequence, which on
CUDA allocates no more than the paged kernel does.
"""
from __future__ import annotations

import logging

import torch
from torch import nn

from autoglm.runner.kv_cache import default_kv_bytes

logger = logging.getLogger(__name__)


@torch.inference_mode()
def forward_peak_bytes(model: nn.Module, num_tokens: int, num_logit_rows: int, device: torch.device) -> int:
    """Peak bytes one forward of ``num_tokens`` tokens and the logits of ``num_logit_rows`` of them allocate."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    held = torch.cuda.memory_allocated(device)
    input_ids = torch.zeros(num_tokens, dtype=torch.long, device=device)
    hidden = model(input_ids, torch.arange(num_tokens, device=device))
    model.compute_logits(hidden[-num_logit_rows:])
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - held
    del input_ids, hidden
    torch.cuda.empty_cache()
    return peak


def step_reserve_bytes(model: nn.Module, device: torch.device, max_num_batched_tokens: int, max_num_seqs: int,
                       decode_graphs: bool) -> int:
    """Bytes to leave free beside the KV pool on ``device``: profiled on CUDA, 0 elsewhere (nothing to measure)."""
    if device.type != "cuda":
        return 0
    eager = forward_peak_bytes(model, max_num_batched_tokens, min(max_num_seqs, max_num_batched_tokens), device)
    graphs = forward_peak_bytes(model, max_num_seqs, max_num_seqs, device) if decode_graphs else 0
    logger.info("profile run: steps need %.1f MiB of activations, decode graphs %.1f MiB", eager / 2**20,
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
