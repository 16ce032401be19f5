"""What the sharded-model tests measure of a model, on a rank or in one process: a fixed prompt's logits,
resident weight bytes and KV bytes per block."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from autoglm.models import ModelConfig, load_model
from autoglm.models.linear_method import LinearMethods, WeightQuantization, with_int_weights
from autoglm.runner.kv_cache import bytes_per_block
from tests.models.logit_parity import prompt_ids

BLOCK_SIZE = 16


@dataclass(frozen=True)
class ModelRun:
    logits: torch.Tensor
    weight_bytes: int
    kv_bytes_per_block: int


def resident_bytes(model: nn.Module) -> int:
    """Bytes of every distinct parameter and buffer the model keeps."""
    tensors = {t.data_ptr(): t for t in [*model.parameters(), *model.buffers()] if t.numel()}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def run_model(model_dir: str | Path, quantization: WeightQuantization | None = None) -> ModelRun:
    """Load the checkpoint in float32 (quantized at load time if asked, or as it is stored) and run the prompt."""
    config = ModelConfig.from_pretrained(model_dir)
    methods = with_int_weights(LinearMethods(), config, quantization, torch.float32, torch.float32)
    model, _ = load_model(model_dir, torch.float32, torch.device("cpu"), config, methods)
    input_ids = prompt_ids(config.vocab_size)
    with torch.inference_mode():
        logits = model.compute_logits(model(input_ids, torch.arange(len(input_ids))))
    return ModelRun(logits, resident_bytes(model), bytes_per_block(model, BLOCK_SIZE, torch.float32))


def run_each(cases: list[tuple[str, WeightQuantization | None]]) -> list[ModelRun]:
    """:func:`run_model` of each ``(model_dir, quantization)``: what a rank runs, all cases in one spawn."""
    return [run_model(model_dir, quantization) for model_dir, quantization in cases]
