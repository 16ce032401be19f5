"""GLM-4: interleaved partial rotary and extra norms on each sublayer's output.

Its checkpoints store the MLP's gate and up projections already fused as
``mlp.gate_up_proj``, which is this engine's own parameter name, so they load as they are.
"""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


def glm4_spec(config: ModelConfig) -> DecoderSpec:
    """GLM-4's decoder, which GLM-4.1V's shares."""
    return DecoderSpec(qkv_bias=config.attention_bias, sandwich_norms=True, interleaved_rotary=True)


class Glm4ForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, glm4_spec(config), linear_methods)
