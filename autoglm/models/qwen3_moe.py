"""Qwen3-MoE: Qwen3's decoder whose sparse layers (``decoder_sparse_step``, less ``mlp_only_layers``) route each
token to its top-k experts by a softmax router, without shared experts."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.models.qwen3 import qwen3_spec


class Qwen3MoeForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, qwen3_spec(config), linear_methods)
