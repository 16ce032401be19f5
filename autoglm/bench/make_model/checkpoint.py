"""``autoglm bench make-model``: a random-weight checkpoint with a real model's architecture.

Throughput depends on the shapes of the matrices, not on what the weights learned, so a
checkpoint of the right shape measures what the real model would, without a download.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from autoglm.bench.make_model.shapes import MODEL_SHAPES
from autoglm.bench.make_model.tokenizer import build_bench_tokenizer


def shape_config(shape_name: str, overrides: dict[str, Any] | None = None) -> PretrainedConfig:
    """The transformers config of ``shape_name`` with ``overrides`` (e.g. fewer layers) applied."""
    shape = MODEL_SHAPES.get(shape_name)
    if shape is None:
        raise ValueError(f"unknown model shape '{shape_name}'; choose one of: {', '.join(MODEL_SHAPES)}")
    values = {**shape.config, **(overrides or {}), "architectures": [shape.architecture]}
    return AutoConfig.for_model(shape.model_type, **values)


def build_random_model(config: PretrainedConfig, dtype: torch.dtype, seed: int) -> PreTrainedModel:
    """Seeded normal weights, allocated once in ``dtype``: a 9B model never needs a float32 copy."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives each tied parameter its own storage again
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # tied parameters come once
            if name.endswith("norm.weight"):
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, config.initializer_range, generator=generator)
    return model.eval()


def make_model(
    shape_name: str,
    out: str | Path,
    *,
    dtype: str = "bfloat16",
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Write the checkpoint and its tokenizer into ``out``; the same seed writes the same weights.

    ``dtype`` is a torch dtype name such as ``"bfloat16"``.
    """
    folder = Path(out)
    config = shape_config(shape_name, overrides)
    build_random_model(config, getattr(torch, dtype), seed).save_pretrained(folder)
    build_bench_tokenizer(config.vocab_size).save_pretrained(folder)
    return folder
