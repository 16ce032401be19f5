"""config.json parsing: both rope spellings, family defaults, token ids, and clear errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoConfig

from autoglm.models import ModelConfig
from tests.tiny_models import TINY_SHAPE

SHAPE = {**TINY_SHAPE, "hidden_act": "silu"}

# Written the way hub checkpoints spell them: top-level rope_theta / rope_scaling / partial_rotary_factor.
HUB_CONFIGS: dict[str, dict[str, Any]] = {
    "llama3.1": {
        **SHAPE,
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        "bos_token_id": 1,
        "eos_token_id": [2, 3],
        "torch_dtype": "bfloat16",
    },
    "qwen2.5-yarn": {
        **SHAPE,
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128},
        "eos_token_id": 2,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
        "torch_dtype": "bfloat16",
    },
    "glm4-partial": {
        **SHAPE,
        "architectures": ["Glm4ForCausalLM"],
        "model_type": "glm4",
        "head_dim": 16,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "attention_bias": True,
        "eos_token_id": [2, 5, 7],
        "torch_dtype": "float32",
    },
}


def transformers_style(hub_config: dict[str, Any]) -> dict[str, Any]:
    """The same config as transformers 5 writes it: one ``rope_parameters`` dict, ``dtype``."""
    settings = {key: value for key, value in hub_config.items() if key != "model_type"}
    converted = AutoConfig.for_model(hub_config["model_type"], **settings).to_dict()
    assert (
        "rope_parameters" in converted and "rope_scaling" not in converted and "rope_theta" not in converted
    )
    return converted


@pytest.mark.parametrize("name", HUB_CONFIGS)
def test_hub_and_transformers_styles_parse_alike(name: str) -> None:
    hub_config = HUB_CONFIGS[name]
    assert ModelConfig.from_dict(hub_config) == ModelConfig.from_dict(transformers_style(hub_config))


def test_hub_style_values() -> None:
    llama = ModelConfig.from_dict(HUB_CONFIGS["llama3.1"])
    assert (llama.rope.rope_type, llama.rope.theta, llama.rope.factor) == ("llama3", 500000.0, 8.0)
    assert (llama.rope.low_freq_factor, llama.rope.high_freq_factor) == (1.0, 4.0)
    assert llama.rope.original_max_position_embeddings == 64
    assert (llama.eos_token_ids, llama.bos_token_id, llama.torch_dtype) == ([2, 3], 1, "bfloat16")

    qwen = ModelConfig.from_dict(HUB_CONFIGS["qwen2.5-yarn"])
    assert (qwen.rope.rope_type, qwen.rope.factor, qwen.rope.theta) == ("yarn", 4.0, 1000000.0)
    assert qwen.eos_token_ids == [2] and qwen.tie_word_embeddings
    assert (qwen.head_dim, qwen.num_key_value_heads) == (16, 2)

    glm = ModelConfig.from_dict(HUB_CONFIGS["glm4-partial"])
    assert (glm.rope.partial_rotary_factor, glm.rope.rope_type, glm.attention_bias) == (0.5, "default", True)


def test_family_defaults_fill_missing_keys() -> None:
    left_out = ("partial_rotary_factor", "attention_bias")
    glm = ModelConfig.from_dict(
        {key: value for key, value in HUB_CONFIGS["glm4-partial"].items() if key not in left_out}
    )
    assert (glm.rope.partial_rotary_factor, glm.attention_bias) == (0.5, True)

    llama = ModelConfig.from_dict(
        {**SHAPE, "architectures": ["LlamaForCausalLM"], "num_key_value_heads": None}
    )
    assert llama.num_key_value_heads == 4 and llama.head_dim == 16
    assert (llama.rope.rope_type, llama.rope.theta, llama.rope.partial_rotary_factor) == (
        "default",
        10000.0,
        1.0,
    )
    assert (llama.attention_bias, llama.mlp_bias, llama.tie_word_embeddings) == (False, False, False)
    assert (llama.eos_token_ids, llama.bos_token_id, llama.torch_dtype) == ([], None, None)


def test_yarn_factor_defaults_to_the_context_stretch() -> None:
    rope = {"rope_type": "yarn", "original_max_position_embeddings": 128}
    config = ModelConfig.from_dict({**SHAPE, "architectures": ["Qwen3ForCausalLM"], "rope_parameters": rope})
    assert config.rope.factor == 4.0  # 512 / 128


def test_from_pretrained_reads_the_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(HUB_CONFIGS["qwen2.5-yarn"]))
    assert ModelConfig.from_pretrained(tmp_path) == ModelConfig.from_dict(HUB_CONFIGS["qwen2.5-yarn"])


def test_missing_key_names_key_and_file(tmp_path: Path) -> None:
    config = {key: value for key, value in HUB_CONFIGS["llama3.1"].items() if key != "intermediate_size"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match=rf"{tmp_path / 'config.json'} is missing the required key 'intermediate_size'"
    ):
        ModelConfig.from_pretrained(tmp_path)


def test_missing_config_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "config.json")):
        ModelConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": "64"}, "'hidden_size' must be a positive integer, got '64'"),
        (
            {"num_key_value_heads": 3},
            r"num_attention_heads \(4\) must be a multiple of num_key_value_heads \(3\)",
        ),
        ({"architectures": []}, "'architectures' must be a non-empty list"),
        ({"eos_token_id": "</s>"}, "'eos_token_id' must be an integer or a list of integers"),
        ({"use_sliding_window": True}, "sliding-window attention"),
        ({"rms_norm_eps": None}, "missing the required key 'rms_norm_eps'"),
    ],
)
def test_bad_values_are_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_dict({**HUB_CONFIGS["qwen2.5-yarn"], **change}, source="qwen/config.json")
