"""The vision tower's settings, read from the ``vision_config`` of a Qwen2.5-VL ``config.json``,
with the defaults of transformers' ``Qwen2_5_VLVisionConfig``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from autoglm.models.vision_config import VisionBlockSettings, VisionTowerConfig

_RMS_NORM_EPS = 1e-6  # fixed in the tower, not a setting of the checkpoint


@dataclass(frozen=True)
class Qwen2_5VLVisionConfig(VisionTowerConfig):
    """The fields of the Qwen2.5-VL vision tower that the encoder needs."""

    defaults: ClassVar[dict[str, Any]] = {
        "depth": 32,
        "hidden_size": 3584,
        "hidden_act": "silu",
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "out_hidden_size": 3584,
        "fullatt_block_indexes": (7, 15, 23, 31),
    }

    intermediate_size: int  # the inner size of each block's MLP
    window_size: int  # the side of an attention window, in pixels
    fullatt_block_indexes: tuple[int, ...]  # the blocks that attend across the whole frame, not a window

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window_units < 1:
            raise ValueError(f"vision window_size {self.window_size} must be at least patch_size x spatial_merge_size "
                             f"= {self.patch_size * self.spatial_merge_size} pixels")
        indexes = self.fullatt_block_indexes
        if not isinstance(indexes, (list, tuple)) or not all(type(index) is int and 0 <= index < self.depth
                                                             for index in indexes):
            raise ValueError(f"vision fullatt_block_indexes must list block indexes in [0, {self.depth}), "
                             f"got {indexes!r}")
        object.__setattr__(self, "fullatt_block_indexes", tuple(indexes))

    @property
    def window_units(self) -> int:
        """The side of an attention window in merge units (``m x m`` patches), as transformers rounds it."""
        return self.window_size // self.spatial_merge_size // self.patch_size

    @property
    def block_settings(self) -> VisionBlockSettings:
        return VisionBlockSettings(self.hidden_size, self.num_heads, self.intermediate_size, self.hidden_act,
                                   _RMS_NORM_EPS, qkv_bias=True, proj_bias=True, mlp_bias=True)
