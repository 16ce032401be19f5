"""Whether a checkpoint reads images, and the token its prompts hold for each merged patch of one."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VisionModel:
    image_token_id: int

    @classmethod
    def of(cls, folder: Path) -> VisionModel | None:
        """The checkpoint's vision side, from its config.json: a vision_config and an image_token_id; None for a
        text-only model."""
        config = json.loads((folder / "config.json").read_text())
        if "vision_config" not in config or not isinstance(config.get("image_token_id"), int):
            return None
        return cls(config["image_token_id"])
