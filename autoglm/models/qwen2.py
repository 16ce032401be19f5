"""Qwen2: q/k/v always carry a bias, whatever the config says; nothing else does."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


class Qwen2ForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, DecoderSpec(qkv_bias=True), linear_methods)
