"""GLM-4.1V (``Glm4vForConditionalGeneration``, the architecture of AutoGLM-Phone-9B): the GLM-4 decoder
built from the checkpoint's ``text_config``, with interleaved multimodal rotary, and its vision encoder beside it."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from autoglm.models.glm4 import glm4_spec
from autoglm.models.glm4v_vision import Glm4vVisionModel, vision_checkpoint_weights
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.models.vision_language import VisionLanguageModel


class Glm4vForConditionalGeneration(VisionLanguageModel):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, glm4_spec(config), linear_methods, Glm4vVisionModel)

    def vision_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """Both of the tower's convolution kernels flattened, the downsample's as well as the patch embedding's."""
        return vision_checkpoint_weights(weights, self.vision_config)
