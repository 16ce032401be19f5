"""A checkpoint's architecture, read from its ``config.json``.

Two spellings of the rotary settings are in use: the hub's (top-level ``rope_theta``,
``rope_scaling`` and ``partial_rotary_factor``) and transformers 5's single
``rope_parameters`` dict. Both parse to the same :class:`ModelConfig`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoglm.models.config_fields import ConfigFields
from autoglm.models.moe_config import MoeConfig, parse_moe_config
from autoglm.models.quantization_config import CheckpointQuantization, parse_quantization_config
from autoglm.models.vision_towers import VISION_TOWER_CONFIGS

# Values a family's transformers config class assumes when config.json leaves them out.
_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "Glm4ForCausalLM": {"partial_rotary_factor": 0.5, "attention_bias": True},
    "Glm4vForConditionalGeneration": {"partial_rotary_factor": 0.5, "attention_bias": True},
    "Glm4MoeForCausalLM": {"partial_rotary_factor": 0.5},
}
# Vision-language architectures: their decoder's settings sit in a nested ``text_config``.
VISION_LANGUAGE_ARCHITECTURES = frozenset(VISION_TOWER_CONFIGS)
# Keys of the outer config that speak for the whole checkpoint, its decoder included.
_OUTER_KEYS = ("architectures", "tie_word_embeddings", "quantization_config")
_DEFAULT_ROPE_THETA = 10000.0
# Qwen2.5-VL's checkpoints spell their rotary "mrope": the default frequencies, turned by three axes.
_ROPE_TYPE_ALIASES = {"mrope": "default"}


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding settings; the scaling fields are None where the type does not use them."""

    rope_type: str
    theta: float
    partial_rotary_factor: float
    original_max_position_embeddings: int
    factor: float | None = None
    low_freq_factor: float | None = None  # llama3
    high_freq_factor: float | None = None  # llama3
    beta_fast: float | None = None  # yarn
    beta_slow: float | None = None  # yarn
    mscale: float | None = None  # yarn
    mscale_all_dim: float | None = None  # yarn
    attention_factor: float | None = None  # yarn
    truncate: bool = True  # yarn: round the correction range to whole dims
    mrope_section: tuple[int, ...] | None = None  # multimodal rotary: frequencies per position axis


@dataclass(frozen=True)
class VisionLanguageConfig:
    """What a vision-language checkpoint adds to its decoder: the image placeholder token its prompts
    expand, and its vision tower's settings, which the model's own encoder parses."""

    image_token_id: int
    vision_config: dict[str, Any]


@dataclass(frozen=True)
class ModelConfig:
    """The fields of a decoder-only checkpoint that the engine's models need."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    hidden_act: str
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    rope: RopeConfig
    eos_token_ids: list[int]
    bos_token_id: int | None
    torch_dtype: str | None  # the checkpoint's dtype name, e.g. "bfloat16"
    quantization: CheckpointQuantization | None = None  # a pre-quantized checkpoint's weight storage
    vision: VisionLanguageConfig | None = None  # None: a text-only model
    use_qk_norm: bool = False  # GLM-4.5's switch for a per-head q/k norm
    moe: MoeConfig | None = None  # None: every layer's MLP is dense
    num_labels: int = 2  # a sequence classifier's outputs (transformers' default where the config names none)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> ModelConfig:
        """Read ``config.json`` from a checkpoint folder."""
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no config.json in model folder {Path(path)}: expected {config_file}")
        try:
            data = json.loads(config_file.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{config_file} is not valid JSON: {error}") from error
        return cls.from_dict(data, source=str(config_file))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> ModelConfig:
        """Parse a config dict; ``source`` names the file in error messages."""
        architectures = ConfigFields(data, source).required("architectures")
        if not isinstance(architectures, list) or not architectures or not isinstance(architectures[0], str):
            raise ValueError(
                f"{source}: 'architectures' must be a non-empty list of names, got {architectures!r}"
            )
        architecture = architectures[0]
        vision = _vision_language_config(data, architecture, source)
        data = _decoder_settings(data, architecture, source)
        fields = ConfigFields(data, source)
        defaults = _FAMILY_DEFAULTS.get(architecture, {})
        num_attention_heads = fields.positive_int("num_attention_heads")
        num_key_value_heads = fields.positive_int("num_key_value_heads", default=num_attention_heads)
        if num_attention_heads % num_key_value_heads:
            raise ValueError(
                f"{source}: num_attention_heads ({num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({num_key_value_heads})"
            )
        hidden_size = fields.positive_int("hidden_size")
        if data.get("use_sliding_window"):
            raise ValueError(
                f"{source}: sliding-window attention (use_sliding_window: true) is not supported"
            )
        max_position_embeddings = fields.positive_int("max_position_embeddings")
        num_hidden_layers = fields.positive_int("num_hidden_layers")
        return cls(
            architecture=architecture,
            vocab_size=fields.positive_int("vocab_size"),
            hidden_size=hidden_size,
            intermediate_size=fields.positive_int("intermediate_size"),
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            num_key_value_heads=num_key_value_heads,
            head_dim=fields.positive_int("head_dim", default=hidden_size // num_attention_heads),
            rms_norm_eps=fields.number("rms_norm_eps"),
            hidden_act=fields.optional("hidden_act", "silu"),
            max_position_embeddings=max_position_embeddings,
            tie_word_embeddings=bool(fields.optional("tie_word_embeddings", False)),
            attention_bias=bool(fields.optional("attention_bias", defaults.get("attention_bias", False))),
            mlp_bias=bool(fields.optional("mlp_bias", False)),
            rope=_parse_rope(data, defaults, max_position_embeddings, source),
            eos_token_ids=_token_id_list(data.get("eos_token_id"), source),
            bos_token_id=data.get("bos_token_id"),
            torch_dtype=data.get("dtype") or data.get("torch_dtype"),
            quantization=(None if data.get("quantization_config") is None
                          else parse_quantization_config(data["quantization_config"], source)),
            vision=vision,
            use_qk_norm=fields.flag("use_qk_norm", False),
            moe=parse_moe_config(fields, architecture, num_hidden_layers),
            num_labels=_num_labels(data, source),
        )


def _num_labels(data: dict[str, Any], source: str) -> int:
    """A sequence classifier's output count: its ``id2label`` entries, else ``num_labels``, else 2."""
    labels = data.get("id2label")
    count = len(labels) if isinstance(labels, dict) and labels else data.get("num_labels", 2)
    if type(count) is not int or count < 1:
        raise ValueError(f"{source}: 'num_labels' must be a whole number of at least 1, got {count!r}")
    return count


def _decoder_settings(data: dict[str, Any], architecture: str, source: str) -> dict[str, Any]:
    """The decoder's settings: a vision-language checkpoint's ``text_config`` under the outer config's
    architecture, tying and quantization (its dtype where the text names none); else the config itself
    (a flat one holds the decoder's settings alone)."""
    text = data.get("text_config") if architecture in VISION_LANGUAGE_ARCHITECTURES else None
    if text is None:
        return data
    if not isinstance(text, dict):
        raise ValueError(f"{source}: 'text_config' must be a JSON object, got {text!r}")
    fallbacks = {key: data[key] for key in ("dtype", "torch_dtype") if key in data}
    return {**fallbacks, **text, **{key: data[key] for key in _OUTER_KEYS if key in data}}


def _vision_language_config(data: dict[str, Any], architecture: str, source: str) -> VisionLanguageConfig | None:
    """The image placeholder and vision tower of a vision-language checkpoint; None for a text-only one, or
    for the decoder's settings alone (a config without ``vision_config``), which build no vision model."""
    if architecture not in VISION_LANGUAGE_ARCHITECTURES or data.get("vision_config") is None:
        return None
    vision_config = data["vision_config"]
    if not isinstance(vision_config, dict):
        raise ValueError(f"{source}: 'vision_config' must be a JSON object, got {vision_config!r}")
    image_token_id = ConfigFields(data, source).required("image_token_id")
    if isinstance(image_token_id, bool) or not isinstance(image_token_id, int) or image_token_id < 0:
        raise ValueError(f"{source}: 'image_token_id' must be a token id (an integer of at least 0), "
                         f"got {image_token_id!r}")
    return VisionLanguageConfig(image_token_id, vision_config)


def _parse_rope(
    data: dict[str, Any], defaults: dict[str, Any], max_position_embeddings: int, source: str
) -> RopeConfig:
    """Merge both spellings; keys inside the rope dict win over top-level ones, as in transformers."""
    rope = data.get("rope_parameters") or data.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"{source}: 'rope_parameters' / 'rope_scaling' must be a JSON object, got {rope!r}")

    def pick(key: str, fallback: Any) -> Any:
        value = rope.get(key)
        if value is None:
            value = data.get(key)
        return fallback if value is None else value

    rope_type = rope.get("rope_type") or rope.get("type") or "default"
    rope_type = _ROPE_TYPE_ALIASES.get(rope_type, rope_type)
    original_max = int(
        data.get("original_max_position_embeddings")
        or rope.get("original_max_position_embeddings")
        or max_position_embeddings
    )
    factor = rope.get("factor")
    if rope_type == "yarn" and factor is None:
        factor = max_position_embeddings / original_max  # yarn's implied stretch
    return RopeConfig(
        rope_type=rope_type,
        theta=float(pick("rope_theta", _DEFAULT_ROPE_THETA)),
        partial_rotary_factor=float(
            pick("partial_rotary_factor", defaults.get("partial_rotary_factor", 1.0))
        ),
        original_max_position_embeddings=original_max,
        factor=factor,
        low_freq_factor=rope.get("low_freq_factor"),
        high_freq_factor=rope.get("high_freq_factor"),
        beta_fast=rope.get("beta_fast"),
        beta_slow=rope.get("beta_slow"),
        mscale=rope.get("mscale"),
        mscale_all_dim=rope.get("mscale_all_dim"),
        attention_factor=rope.get("attention_factor"),
        truncate=bool(rope.get("truncate", True)),
        mrope_section=None if rope.get("mrope_section") is None else tuple(rope["mrope_section"]),
    )


def _token_id_list(value: Any, source: str) -> list[int]:
    """config.json gives eos_token_id as one id, a list of ids, or nothing."""
    if value is None:
        return []
    ids = value if isinstance(value, list) else [value]
    if not all(isinstance(token_id, int) and not isinstance(token_id, bool) for token_id in ids):
        raise ValueError(f"{source}: 'eos_token_id' must be an integer or a list of integers, got {value!r}")
    return ids
