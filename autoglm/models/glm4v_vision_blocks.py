"""The patch merger of the GLM-4.1V vision tower (module names follow the checkpoint's, ``merger.proj``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.vision_blocks import VisionGatedMLP


class PatchMerger(VisionGatedMLP):
    """The last step into the decoder's space: a projection, LayerNorm and GELU, then a gated MLP."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase) -> None:
        size = config.out_hidden_size
        super().__init__(size, config.intermediate_size, config.hidden_act, False, linear_method)
        self.proj = Linear(size, size, False, linear_method)
        self.post_projection_norm = nn.LayerNorm(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.gelu(self.post_projection_norm(self.proj(x))))
