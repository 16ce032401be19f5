"""``autoglm bench make-model``: a random-weight checkpoint with a real model's architecture.

Throughput depends on the shapes of the matrices, not on what the weights learned, so a
checkpoint of the right shape measures what the real model would, without a download.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, PretrainedConfig

from autoglm.bench.make_model.extra_shard import add_shard
from autoglm.bench.make_model.model_shape import ModelShape
from autoglm.bench.make_model.mtp_layers import mtp_layer_count, random_mtp_weights
from autoglm.bench.make_model.random_weights import build_random_model
from autoglm.bench.make_model.shapes import MODEL_SHAPES
from autoglm.bench.make_model.tokenizer import CHAT_TEMPLATE, build_bench_tokenizer, special_token_ids


def find_shape(shape_name: str) -> ModelShape:
    shape = MODEL_SHAPES.get(shape_name)
    if shape is None:
        raise ValueError(f"unknown model shape '{shape_name}'; choose one of: {', '.join(MODEL_SHAPES)}")
    return shape


def _set_path(values: dict[str, Any], dotted_key: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, so an override reaches e.g. a vision-language model's ``text_config``."""
    *parents, key = dotted_key.split(".")
    for parent in parents:
        child = values.setdefault(parent, {})
        if not isinstance(child, dict):
            raise ValueError(f"cannot set {dotted_key}: {parent} is a {type(child).__name__}, not a nested config")
        values = child
    values[key] = value


def _marker_ids(shape: ModelShape) -> dict[str, int | list[int]]:
    """Each ``token_id_fields`` entry as the id(s) the bench tokenizer gives its token(s)."""
    ids = special_token_ids(shape.special_tokens)
    return {field: ids[tokens] if isinstance(tokens, str) else [ids[token] for token in tokens]
            for field, tokens in shape.token_id_fields.items()}


def shape_config(shape_name: str, overrides: dict[str, Any] | None = None) -> PretrainedConfig:
    """The transformers config of ``shape_name`` with ``overrides`` (e.g. fewer layers) applied.

    Override keys may be dotted (``text_config.hidden_size``) to reach a nested config.
    """
    shape = find_shape(shape_name)
    values = copy.deepcopy(shape.config)
    for key, value in {**_marker_ids(shape), **(overrides or {}), "architectures": [shape.architecture]}.items():
        _set_path(values, key, value)
    return AutoConfig.for_model(shape.model_type, **values)


def make_model(
    shape_name: str,
    out: str | Path,
    *,
    dtype: str = "bfloat16",
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Write the checkpoint, its tokenizer and any image processor config into ``out``; the same seed writes the
    same weights.

    ``dtype`` is a torch dtype name such as ``"bfloat16"``. A model with multi-token prediction layers gets them in a
    shard of their own after the decoder's, drawn after all of the decoder's weights.
    """
    folder = Path(out)
    shape = find_shape(shape_name)
    config = shape_config(shape_name, overrides)
    mtp_layers = mtp_layer_count(config)
    generator = torch.Generator().manual_seed(seed)
    model = build_random_model(config, getattr(torch, dtype), generator)
    model.save_pretrained(folder)
    if mtp_layers:
        add_shard(folder, random_mtp_weights(model, generator))
    tokenizer = build_bench_tokenizer(config.get_text_config().vocab_size, shape.special_tokens,
                                      shape.chat_template or CHAT_TEMPLATE)
    tokenizer.save_pretrained(folder)
    if shape.image_processor is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(shape.image_processor, indent=2) + "\n")
    return folder
