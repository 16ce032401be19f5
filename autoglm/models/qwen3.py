"""Qwen3: per-head RMSNorm on q and k before rotary; biases follow attention_bias."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


class Qwen3ForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        spec = DecoderSpec(qkv_bias=config.attention_bias, output_bias=config.attention_bias, qk_norm=True)
        super().__init__(config, spec, linear_methods)
