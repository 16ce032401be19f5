"""Which vision tower's settings each vision-language architecture reads from its ``vision_config``:
the one table the config parser, the models and the engine's image checks all consult."""
from __future__ import annotations

from typing import Any

from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.qwen2_5_vl_vision_config import Qwen2_5VLVisionConfig
from autoglm.models.vision_config import VisionTowerConfig

VISION_TOWER_CONFIGS: dict[str, type[VisionTowerConfig]] = {
    "Glm4vForConditionalGeneration": Glm4vVisionConfig,
    "Qwen2_5_VLForConditionalGeneration": Qwen2_5VLVisionConfig,
}


def vision_tower_config(architecture: str, vision_config: dict[str, Any]) -> VisionTowerConfig:
    """The parsed ``vision_config`` of a checkpoint of ``architecture``; other architectures name the known ones."""
    config_class = VISION_TOWER_CONFIGS.get(architecture)
    if config_class is None:
        raise ValueError(f"architecture '{architecture}' has no vision tower; vision-language architectures: "
                         f"{', '.join(VISION_TOWER_CONFIGS)}")
    return config_class.from_dict(vision_config)
