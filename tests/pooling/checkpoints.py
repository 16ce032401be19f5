"""Tiny random pooling checkpoints: a Qwen3 embedding model in sentence-transformers' layout, and sequence
classifiers, each loadable by transformers as the reference."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification

from tests.tiny_models import WEIGHT_STD, build_tiny_tokenizer, make_tiny_checkpoint, tiny_config


def make_embedding_checkpoint(path: Path, pooling_mode: str = "lasttoken") -> Path:
    """A tiny Qwen3 causal LM whose folder says it embeds: modules.json and a 1_Pooling config."""
    folder = make_tiny_checkpoint("qwen3", path)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 64,
                                                                   f"pooling_mode_{pooling_mode}": True}))
    return folder


def make_classifier_checkpoint(arch: str, path: Path, num_labels: int = 1, seed: int = 0) -> Path:
    """A tiny ``arch`` (qwen2, qwen3, llama) *ForSequenceClassification with well-spread random weights."""
    name = {"qwen2": "Qwen2", "qwen3": "Qwen3", "llama": "Llama"}[arch]
    config = tiny_config(arch, architectures=[f"{name}ForSequenceClassification"], num_labels=num_labels)
    model = AutoModelForSequenceClassification.from_config(config, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.1 * noise if parameter_name.endswith("norm.weight") else WEIGHT_STD * noise)
    folder = Path(path)
    model.save_pretrained(folder)
    build_tiny_tokenizer(config.vocab_size).save_pretrained(folder)
    return folder
