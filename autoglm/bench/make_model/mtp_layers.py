"""GLM's multi-token prediction (MTP) layers: transformers' ``Glm4MoeForCausalLM`` neither builds nor loads them, but
GLM-4.5's published checkpoints carry them after the decoder's last layer, and the engine serves them as a speculative
method, so a checkpoint of GLM's shape holds them too.

MTP layer ``k`` of a decoder of ``N`` layers is stored under ``model.layers.{N + k}.``, as GLM-4.5 stores it:

- ``enorm`` and ``hnorm``: the norms of the next token's embedding and of the decoder's last hidden state;
- ``eh_proj``: their concatenation, in that order, projected back to the hidden size;
- a decoder layer of its own, a mixture-of-experts one: ``self_attn.*``, ``mlp.*`` (experts one by one, as the
  decoder's own layers are saved), ``input_layernorm``, ``post_attention_layernorm``;
- ``shared_head.norm``: the norm before the LM head;
- ``embed_tokens`` and ``shared_head.head``: copies of the model's embedding and LM head, which the MTP layer shares
  (GLM-4.6's checkpoints leave these two out).
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.core_model_loading import revert_weight_conversion

from autoglm.bench.make_model.random_weights import fill_random


def mtp_layer_count(config: PretrainedConfig) -> int:
    """``num_nextn_predict_layers``, or 0 for a model without MTP layers."""
    count = getattr(config.get_text_config(), "num_nextn_predict_layers", 0) or 0
    if count < 0:
        raise ValueError(f"num_nextn_predict_layers must be 0 or more, got {count}")
    return count


class _MtpLayer(nn.Module):
    """One MTP layer's modules under the names its checkpoint gives them: a decoder layer's, and its own beside them."""

    def __init__(self, decoder_layer: nn.Module, config: PretrainedConfig, dtype: torch.dtype) -> None:
        super().__init__()
        norm_class = type(decoder_layer.input_layernorm)
        hidden = config.hidden_size
        self.enorm = norm_class(hidden, eps=config.rms_norm_eps)
        self.hnorm = norm_class(hidden, eps=config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * hidden, hidden, bias=False)
        self.shared_head = nn.Module()
        self.shared_head.norm = norm_class(hidden, eps=config.rms_norm_eps)
        self.to(dtype)  # before the decoder layer joins: its router keeps the float32 transformers gives it
        for name, child in decoder_layer.named_children():
            self.add_module(name, child)


def random_mtp_weights(model: PreTrainedModel, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The checkpoint tensors of ``model``'s MTP layers, drawn from ``generator`` as its own layers were."""
    config = model.config
    first = config.num_hidden_layers
    # The same model with the MTP layers' decoder layers after its own, on the meta device, where it costs nothing at
    # any size: each one gets the class, dtypes and saved names of a real layer at its index.
    extended_config = copy.deepcopy(config)
    extended_config.num_hidden_layers = first + mtp_layer_count(config)
    with torch.device("meta"):
        extended = type(model)._from_config(extended_config, dtype=model.dtype)
    embedding, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    tensors: dict[str, torch.Tensor] = {}
    for index in range(first, extended_config.num_hidden_layers):
        with torch.device("meta"):
            layer = _MtpLayer(extended.get_decoder().layers[index], config, model.dtype)
        layer.to_empty(device="cpu")
        fill_random(layer, config.initializer_range, generator)
        prefix = f"model.layers.{index}."
        tensors |= layer.state_dict(prefix=prefix)
        tensors |= {f"{prefix}embed_tokens.weight": embedding.detach().clone(),
                    f"{prefix}shared_head.head.weight": head.detach().clone()}
    # Fused expert tensors back to one tensor per expert, as save_pretrained writes the decoder's own layers.
    return revert_weight_conversion(extended, tensors)
