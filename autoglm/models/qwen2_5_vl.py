"""Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``): the Qwen2 decoder built from the checkpoint's
``text_config``, with rotate-half multimodal rotary, and its windowed vision encoder beside it."""
from __future__ import annotations

from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.models.qwen2 import QWEN2_SPEC
from autoglm.models.qwen2_5_vl_vision import Qwen2_5VLVisionModel
from autoglm.models.vision_language import VisionLanguageModel


class Qwen2_5_VLForConditionalGeneration(VisionLanguageModel):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, QWEN2_SPEC, linear_methods, Qwen2_5VLVisionModel)
