"""The vision tower's settings, read from the ``vision_config`` of a GLM-4.1V ``config.json``,
with the defaults of transformers' ``Glm4vVisionConfig``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from autoglm.models.vision_config import VisionBlockSettings, VisionTowerConfig


@dataclass(frozen=True)
class Glm4vVisionConfig(VisionTowerConfig):
    """The fields of the GLM-4.1V vision tower that the encoder needs."""

    defaults: ClassVar[dict[str, Any]] = {
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

    attention_bias: bool
    image_size: int
    rms_norm_eps: float
    intermediate_size: int  # the inner size of the patch merger's MLP; each block's is out_hidden_size

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.image_size % self.patch_size:
            raise ValueError(f"vision image_size {self.image_size} must be a multiple of patch_size {self.patch_size}")

    @property
    def positions_per_side(self) -> int:
        """The side of the learned square grid of position embeddings."""
        return self.image_size // self.patch_size

    @property
    def block_settings(self) -> VisionBlockSettings:
        return VisionBlockSettings(self.hidden_size, self.num_heads, self.out_hidden_size, self.hidden_act,
                                   self.rms_norm_eps, qkv_bias=self.attention_bias, proj_bias=False, mlp_bias=False)
