"""Each family's logits match transformers at every prompt position (float32)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.models.logit_parity import max_logprob_difference
from tests.tiny_models import make_tiny_checkpoint

TOLERANCE = 1e-4

# name -> (family, config overrides); every case has 4 query heads over 2 KV heads (GQA) unless stated.
FAMILY_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", {}),
    "llama-tied-with-biases": (
        "llama",
        {"tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True},
    ),
    "llama-no-gqa": ("llama", {"num_key_value_heads": 4}),
    "qwen2": ("qwen2", {}),
    "qwen2-tied": ("qwen2", {"tie_word_embeddings": True}),
    "qwen3": ("qwen3", {}),
    "qwen3-with-biases": ("qwen3", {"attention_bias": True}),
    "glm4": ("glm4", {}),
    "glm4-tied-no-bias": ("glm4", {"tie_word_embeddings": True, "attention_bias": False}),
}

# Rope variants, checked at positions 300-319 where the scaling changes the angles most.
ROPE_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-linear": ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "llama-llama3": (
        "llama",
        {
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            }
        },
    ),
    "qwen2-yarn": (
        "qwen2",
        {"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}},
    ),
    "qwen3-theta": ("qwen3", {"rope_theta": 1_000_000.0}),
    "glm4-yarn-partial": (
        "glm4",
        {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 256}},
    ),
}


@pytest.mark.parametrize("case", FAMILY_CASES)
def test_family_matches_transformers(case: str, tmp_path) -> None:
    family, overrides = FAMILY_CASES[case]
    model_dir = make_tiny_checkpoint(family, tmp_path, **overrides)
    assert max_logprob_difference(model_dir) < TOLERANCE


@pytest.mark.parametrize("case", ROPE_CASES)
def test_rope_variant_matches_transformers(case: str, tmp_path) -> None:
    family, overrides = ROPE_CASES[case]
    model_dir = make_tiny_checkpoint(family, tmp_path, **overrides)
    assert max_logprob_difference(model_dir, first_position=300) < TOLERANCE
