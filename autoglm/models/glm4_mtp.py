"""GLM-4.5's multi-token prediction (MTP) layer: from the decoder's last hidden state at position ``i`` and the
embedding of token ``i + 1``, it predicts token ``i + 2``, with the model's own embedding and LM head.

As transformers computes it: ``eh_proj(cat(enorm(embedding), hnorm(hidden)))`` goes through one decoder layer of
its own (a mixture-of-experts one), then ``shared_head.norm``; that normed state both makes the logits and is the
hidden state the next step of a chain takes. The hidden state taken from the decoder is the one after its final
norm (what the LM head reads). The pair of position ``i`` is rotated as position ``i + 1``, its token's position.

Its checkpoint tensors are ``model.layers.{N}.*``, ``N`` the decoder's layer count (see ``bench/make_model/
mtp_layers``); the copies of the embedding and LM head stored there (``embed_tokens``, ``shared_head.head``) are
not loaded: the decoder's are used.
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from autoglm.models.decoder import DecoderLayer
from autoglm.models.glm4_moe import glm4_moe_spec
from autoglm.models.layers import RMSNorm
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethods, process_weights_after_loading
from autoglm.models.loader import default_dtype, safetensors_files
from autoglm.models.model_config import ModelConfig
from autoglm.models.partition import current_partition
from autoglm.models.rotary import RotaryAngles
from autoglm.models.weight_loading import load_checkpoint_weights

MTP_ARCHITECTURES = ("Glm4MoeForCausalLM",)
# The decoder's own tensors, which the MTP layer shares rather than loads.
_SHARED_TENSORS = ("embed_tokens.", "shared_head.head.")
_OWN_TENSORS = ("enorm.", "hnorm.", "eh_proj.", "shared_head.norm.")


class _SharedHead(nn.Module):
    """Holds ``shared_head.norm`` under its checkpoint name."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class Glm4MtpLayer(nn.Module):
    """One MTP layer: ``[T]`` token embeddings and the ``[T, hidden]`` states before them in, normed states out."""

    def __init__(self, config: ModelConfig, linear_methods: LinearMethods, layer_index: int) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.layer_index = layer_index
        self.enorm = RMSNorm(hidden, config.rms_norm_eps)
        self.hnorm = RMSNorm(hidden, config.rms_norm_eps)
        self.eh_proj = Linear(2 * hidden, hidden, False, linear_methods.layers)
        self.block = DecoderLayer(config, glm4_moe_spec(config), layer_index, linear_methods.layers,
                                  linear_methods.experts, current_partition(config))
        self.shared_head = _SharedHead(config)

    def forward(self, embeddings: torch.Tensor, previous_hidden: torch.Tensor, angles: RotaryAngles) -> torch.Tensor:
        """``angles``: of each row's token position (one past its hidden state's)."""
        projected = self.eh_proj(torch.cat([self.enorm(embeddings), self.hnorm(previous_hidden)], dim=-1))
        hidden, residual = self.block(projected, None, angles)
        return self.shared_head.norm.add_and_norm(hidden, residual)[0]


def load_mtp_layer(model_path: Path, config: ModelConfig, dtype: torch.dtype, device: torch.device,
                   linear_methods: LinearMethods) -> Glm4MtpLayer:
    """The first MTP layer of the checkpoint in ``model_path``, on ``device`` in ``dtype``.

    Raises ValueError when the architecture has no MTP layer, the config counts none, or the checkpoint lacks its
    tensors.
    """
    if config.architecture not in MTP_ARCHITECTURES or config.moe is None:
        raise ValueError(f"speculative method 'mtp' needs a model with multi-token prediction layers "
                         f"({', '.join(MTP_ARCHITECTURES)}); {config.architecture} has none")
    if config.moe.num_nextn_predict_layers == 0:
        raise ValueError(f"speculative method 'mtp': {model_path}/config.json sets num_nextn_predict_layers to 0, "
                         "so the checkpoint has no multi-token prediction layer; choose method 'ngram' or "
                         "'draft_model'")
    index = config.num_hidden_layers
    prefix = f"model.layers.{index}."
    tensors = _prefixed_tensors(model_path, prefix)
    if not tensors:
        raise ValueError(f"speculative method 'mtp': the checkpoint in {model_path} holds no tensors of its "
                         f"multi-token prediction layer ({prefix}*), although num_nextn_predict_layers is "
                         f"{config.moe.num_nextn_predict_layers}")
    with torch.device(device), default_dtype(dtype):
        layer = Glm4MtpLayer(config, linear_methods, index)
    renamed = ((name if name.startswith(_OWN_TENSORS) else f"block.{name}", tensor)
               for name, tensor in tensors.items() if not name.startswith(_SHARED_TENSORS))
    try:
        load_checkpoint_weights(layer, renamed)
    except ValueError as error:
        raise ValueError(f"speculative method 'mtp': the multi-token prediction layer ({prefix}*) in {model_path} "
                         f"does not load: {error}") from None
    process_weights_after_loading(layer)
    return layer.eval()


def _prefixed_tensors(model_path: Path, prefix: str) -> dict[str, torch.Tensor]:
    """Every checkpoint tensor under ``prefix``, named without it; the other tensors are not read."""
    tensors: dict[str, torch.Tensor] = {}
    for file in safetensors_files(model_path):
        with safe_open(str(file), framework="pt", device="cpu") as reader:
            for name in reader.keys():
                if name.startswith(prefix):
                    tensors[name.removeprefix(prefix)] = reader.get_tensor(name)
    return tensors
