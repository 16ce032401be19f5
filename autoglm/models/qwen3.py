"""Qwen3: per-head RMSNorm on q and k before rotary; biases follow attention_bias."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


def qwen3_spec(config: ModelConfig) -> DecoderSpec:
    """Qwen3's decoder, which Qwen3-MoE's shares."""
    return DecoderSpec(qkv_bias=config.attention_bias, output_bias=config.attention_bias, qk_norm=True)


class Qwen3ForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, qwen3_spec(config), linear_methods)
