"""GLM-4.5 and GLM-4.6 (``Glm4MoeForCausalLM``): unlike GLM-4, plain pre-norm layers and half-split partial
rotary (the first half of each head's dims, rotated half against half); biases on q/k/v only, an optional
per-head q/k norm (``use_qk_norm``); after ``first_k_dense_replace`` dense layers, every layer routes each token
to its top-k experts by grouped sigmoid scores, beside one MLP of shared experts.

Its checkpoints append ``num_nextn_predict_layers`` multi-token prediction layers after the decoder's
(``model.layers.N`` and on, N the decoder's layer count); the decoder does not load them: speculative method
``mtp`` loads the first of them apart (see ``glm4_mtp``).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig


def glm4_moe_spec(config: ModelConfig) -> DecoderSpec:
    """GLM-4.5's layers, the decoder's and its multi-token prediction layers' alike."""
    return DecoderSpec(qkv_bias=config.attention_bias, qk_norm=config.use_qk_norm)


class Glm4MoeForCausalLM(DecoderForCausalLM):
    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, glm4_moe_spec(config), linear_methods)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """The decoder's tensors; the multi-token prediction layers' are skipped."""
        first, count = self.config.num_hidden_layers, self.config.moe.num_nextn_predict_layers
        prediction_layers = tuple(f"model.layers.{index}." for index in range(first, first + count))
        super().load_weights((name, tensor) for name, tensor in weights if not name.startswith(prediction_layers))
