"""The vision tower's settings, read from the ``vision_config`` of a GLM-4.1V ``config.json``.

Missing keys take the defaults of transformers' ``Glm4vVisionConfig``, so a checkpoint that
leaves them out means what it means to transformers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_DEFAULTS: dict[str, Any] = {
    "depth": 24,
    "hidden_size": 1536,
    "hidden_act": "silu",
    "attention_bias": False,
    "num_heads": 12,
    "in_channels": 3,
    "image_size": 336,
    "patch_size": 14,
    "rms_norm_eps": 1e-5,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 4096,
    "intermediate_size": 13696,
}
_ROTARY_TYPE = "axial"  # the only rotary the vision tower has
_DEFAULT_ROPE_THETA = 10000.0


@dataclass(frozen=True)
class Glm4vVisionConfig:
    """The fields of the vision tower that the encoder needs."""

    depth: int
    hidden_size: int
    hidden_act: str
    attention_bias: bool
    num_heads: int
    in_channels: int
    image_size: int
    patch_size: int
    rms_norm_eps: float
    spatial_merge_size: int
    temporal_patch_size: int
    out_hidden_size: int  # the decoder's hidden size; also the inner size of each block's MLP
    intermediate_size: int  # the inner size of the patch merger's MLP
    rope_theta: float

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"vision hidden_size {self.hidden_size} must divide by num_heads {self.num_heads}")
        if self.head_dim % 4:
            raise ValueError(f"vision head_dim {self.head_dim} must be a multiple of 4: half rotates by the "
                             "patch's row, half by its column")
        if self.image_size % self.patch_size:
            raise ValueError(f"vision image_size {self.image_size} must be a multiple of patch_size {self.patch_size}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def patch_features(self) -> int:
        """The length of one flattened patch: channels x frames x rows x columns."""
        return self.in_channels * self.temporal_patch_size * self.patch_size ** 2

    @property
    def positions_per_side(self) -> int:
        """The side of the learned square grid of position embeddings."""
        return self.image_size // self.patch_size

    @classmethod
    def from_dict(cls, vision_config: dict[str, Any]) -> Glm4vVisionConfig:
        """From the ``vision_config`` dict of a ``config.json``."""
        settings = {**_DEFAULTS, **{key: vision_config[key] for key in _DEFAULTS if key in vision_config}}
        for key in ("image_size", "patch_size"):
            if not isinstance(settings[key], int):
                raise ValueError(f"vision {key} must be one integer (square images and patches), got {settings[key]!r}")
        rope = vision_config.get("rope_parameters") or {}
        rope_type = rope.get("rope_type", _ROTARY_TYPE)
        if rope_type != _ROTARY_TYPE:
            raise ValueError(f"vision rope_type '{rope_type}' is not supported; supported: {_ROTARY_TYPE}")
        return cls(**settings, rope_theta=float(rope.get("rope_theta", _DEFAULT_ROPE_THETA)))

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> Glm4vVisionConfig:
        """From the ``vision_config`` of the ``config.json`` in a checkpoint folder."""
        config_file = Path(folder) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no config.json in model folder {folder}")
        vision_config = json.loads(config_file.read_text()).get("vision_config")
        if not isinstance(vision_config, dict):
            raise ValueError(f"{config_file} has no 'vision_config' object: not a vision-language checkpoint")
        return cls.from_dict(vision_config)
