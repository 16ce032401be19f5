"""Qwen2: q/k/v always carry a bias, whatever the config says; nothing else does."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig

QWEN2_SPEC = DecoderSpec(qkv_bias=True)  # Qwen2.5-VL's decoder shares it


class Qwen2ForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, QWEN2_SPEC, linear_methods)
