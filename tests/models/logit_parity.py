"""Compare the engine's logits with the transformers implementation of the same checkpoint."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from autoglm.models import ModelConfig, load_model

PROMPT_LENGTH = 20


def prompt_ids(vocab_size: int, seed: int = 0) -> torch.Tensor:
    """A fixed pseudo-random prompt that avoids the special tokens (ids 0-2)."""
    return torch.randint(3, vocab_size, (PROMPT_LENGTH,), generator=torch.Generator().manual_seed(seed))


def engine_logprobs(
    model_dir: Path, input_ids: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """log-softmax ``[T, vocab]`` from the engine's model over one prompt."""
    model, _ = load_model(model_dir, dtype, torch.device("cpu"))
    with torch.inference_mode():
        return model.compute_logits(model(input_ids, positions)).log_softmax(-1)


def reference_logprobs(model_dir: Path, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """log-softmax ``[T, vocab]`` from transformers, float32."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.inference_mode():
        logits = model(input_ids[None], position_ids=positions[None]).logits[0]
    return logits.float().log_softmax(-1)


def max_logprob_difference(model_dir: Path, *, first_position: int = 0) -> float:
    """Largest |engine - transformers| log-prob over every position and token, float32."""
    input_ids = prompt_ids(ModelConfig.from_pretrained(model_dir).vocab_size)
    positions = torch.arange(first_position, first_position + PROMPT_LENGTH)
    engine = engine_logprobs(model_dir, input_ids, positions)
    reference = reference_logprobs(model_dir, input_ids, positions)
    return (engine - reference).abs().max().item()
