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
import transformers
from transformers import AutoConfig, PretrainedConfig, PreTrainedModel

from autoglm.bench.make_model.model_shape import ModelShape
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


def build_random_model(config: PretrainedConfig, dtype: torch.dtype, seed: int) -> PreTrainedModel:
    """Seeded normal weights, allocated once in ``dtype``: a 9B model never needs a float32 copy."""
    model_class = getattr(transformers, config.architectures[0])
    with torch.device("meta"):
        model = model_class._from_config(config, dtype=dtype)
    model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives each tied parameter its own storage again
    norm_weights = {f"{name}.weight" for name, module in model.named_modules() if "Norm" in type(module).__name__}
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # tied parameters come once
            if name in norm_weights:
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, config.get_text_config().initializer_range, generator=generator)
    return model.eval()


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

    ``dtype`` is a torch dtype name such as ``"bfloat16"``.
    """
    folder = Path(out)
    shape = find_shape(shape_name)
    config = shape_config(shape_name, overrides)
    build_random_model(config, getattr(torch, dtype), seed).save_pretrained(folder)
    tokenizer = build_bench_tokenizer(config.get_text_config().vocab_size, shape.special_tokens,
                                      shape.chat_template or CHAT_TEMPLATE)
    tokenizer.save_pretrained(folder)
    if shape.image_processor is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(shape.image_processor, indent=2) + "\n")
    return folder
