"""The settings every vision tower shares, read from the ``vision_config`` of a vision-language
``config.json``, and the shape of one of its transformer blocks.

Each model's config names its own fields and transformers' defaults for them; missing keys take
those defaults, so a checkpoint that leaves them out means what it means to transformers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

_ROTARY_TYPE = "axial"  # the only rotary the vision towers have
_DEFAULT_ROPE_THETA = 10000.0

ConfigType = TypeVar("ConfigType", bound="VisionTowerConfig")


@dataclass(frozen=True)
class VisionBlockSettings:
    """What shapes one block of a vision tower; the towers' blocks differ in nothing else."""

    hidden_size: int
    num_heads: int
    mlp_size: int
    hidden_act: str
    rms_norm_eps: float
    qkv_bias: bool
    proj_bias: bool
    mlp_bias: bool

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class VisionTowerConfig:
    """The fields of a vision tower that every encoder needs; subclasses add their own and set
    ``defaults`` to transformers' defaults for every key they read."""

    defaults: ClassVar[dict[str, Any]]

    depth: int
    hidden_size: int
    hidden_act: str
    num_heads: int
    in_channels: int
    patch_size: int
    spatial_merge_size: int
    temporal_patch_size: int
    out_hidden_size: int  # the decoder's hidden size
    rope_theta: float

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"vision hidden_size {self.hidden_size} must divide by num_heads {self.num_heads}")
        if self.head_dim % 4:
            raise ValueError(f"vision head_dim {self.head_dim} must be a multiple of 4: half rotates by the "
                             "patch's row, half by its column")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def patch_features(self) -> int:
        """The length of one flattened patch: channels x frames x rows x columns."""
        return self.in_channels * self.temporal_patch_size * self.patch_size ** 2

    @classmethod
    def from_dict(cls: type[ConfigType], vision_config: dict[str, Any]) -> ConfigType:
        """From the ``vision_config`` dict of a ``config.json``."""
        settings = {**cls.defaults, **{key: vision_config[key] for key in cls.defaults if key in vision_config}}
        for key, default in cls.defaults.items():
            if type(default) is int and not isinstance(settings[key], int):
                raise ValueError(f"vision {key} must be one integer (sizes are of square sides), got {settings[key]!r}")
        rope = vision_config.get("rope_parameters") or {}
        rope_type = rope.get("rope_type", _ROTARY_TYPE)
        if rope_type != _ROTARY_TYPE:
            raise ValueError(f"vision rope_type '{rope_type}' is not supported; supported: {_ROTARY_TYPE}")
        return cls(**settings, rope_theta=float(rope.get("rope_theta", _DEFAULT_ROPE_THETA)))

    @classmethod
    def from_pretrained(cls: type[ConfigType], folder: str | Path) -> ConfigType:
        """From the ``vision_config`` of the ``config.json`` in a checkpoint folder."""
        config_file = Path(folder) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no config.json in model folder {folder}")
        vision_config = json.loads(config_file.read_text()).get("vision_config")
        if not isinstance(vision_config, dict):
            raise ValueError(f"{config_file} has no 'vision_config' object: not a vision-language checkpoint")
        return cls.from_dict(vision_config)
