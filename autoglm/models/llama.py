"""Llama: biases only where the config asks for them (attention_bias, mlp_bias)."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


def llama_spec(config: ModelConfig) -> DecoderSpec:
    """Llama's decoder, which its sequence classifier shares."""
    return DecoderSpec(qkv_bias=config.attention_bias, output_bias=config.attention_bias, mlp_bias=config.mlp_bias)


class LlamaForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, llama_spec(config), linear_methods)
