"""What a vision-language model asks of a prompt's images, read from its config alone, so that the
engine can refuse a bad image before any step (and without the model, which may live in other processes)."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.models.model_config import ModelConfig
from autoglm.models.vision_towers import vision_tower_config


@dataclass(frozen=True)
class ImageInputSpec:
    """The placeholder token a prompt expands per merged patch, the merge window's side, and the length
    of one flattened patch in ``pixel_values``."""

    image_token_id: int
    spatial_merge_size: int
    patch_features: int

    @classmethod
    def of(cls, config: ModelConfig) -> ImageInputSpec | None:
        """The model's spec; None for a model that takes no images."""
        if config.vision is None:
            return None
        vision = vision_tower_config(config.architecture, config.vision.vision_config)
        return cls(config.vision.image_token_id, vision.spatial_merge_size, vision.patch_features)
