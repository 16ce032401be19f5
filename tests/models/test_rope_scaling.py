"""Inverse frequencies and attention scaling equal transformers' for every supported rope type."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from autoglm.models import ModelConfig
from autoglm.models.rope_scaling import rope_frequencies
from tests.tiny_models import tiny_config

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}

# name -> (family, rope settings as a config.json would give them)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "linear": ("llama", {"rope_type": "linear", "factor": 2.5}),
    "llama3": (
        "llama",
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 500000.0,
        },
    ),
    "yarn": ("qwen2", YARN),
    "yarn-no-truncate": ("qwen3", {**YARN, "truncate": False}),
    "yarn-mscale": ("qwen3", {**YARN, "mscale": 1.0, "mscale_all_dim": 0.5}),
    "yarn-attention-factor": ("qwen2", {**YARN, "attention_factor": 1.5}),
    "yarn-betas": ("qwen2", {**YARN, "beta_fast": 16, "beta_slow": 2}),
    "yarn-partial-glm4": ("glm4", {**YARN, "rope_theta": 1000.0}),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_transformers(case: str) -> None:
    family, rope = CASES[case]
    reference_config = tiny_config(family, rope_scaling=dict(rope))
    expected_inv_freq, expected_scaling = ROPE_INIT_FUNCTIONS[rope["rope_type"]](reference_config)

    config = ModelConfig.from_dict(reference_config.to_dict())
    rotary_dim = int(config.head_dim * config.rope.partial_rotary_factor)
    inv_freq, scaling = rope_frequencies(config.rope, rotary_dim)

    assert torch.equal(inv_freq, expected_inv_freq)
    assert scaling == pytest.approx(expected_scaling, rel=1e-12)


def test_unsupported_type_lists_supported_ones() -> None:
    config = ModelConfig.from_dict(
        {**tiny_config("llama").to_dict(), "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}
    )
    with pytest.raises(
        ValueError, match="unsupported rope type 'dynamic'; supported: default, linear, llama3, yarn"
    ):
        rope_frequencies(config.rope, config.head_dim)


def test_missing_scaling_parameter_is_named() -> None:
    rope = {"rope_type": "llama3", "factor": 8.0}
    config = ModelConfig.from_dict({**tiny_config("llama").to_dict(), "rope_parameters": rope})
    with pytest.raises(ValueError, match="'low_freq_factor' and 'high_freq_factor'"):
        rope_frequencies(config.rope, config.head_dim)
