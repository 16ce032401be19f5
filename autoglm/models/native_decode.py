"""The native decode step: a decode step of few sequences through the whole decoder stack as one compiled
call (``kernels/decode_step.cpp``).

Layer by layer, a decode step is hundreds of PyTorch ops and kernel calls, each with its Python, dispatch
and thread-pool fork and join; at batch 1 on a few cores that costs as much as streaming the weights.
The native step runs the same kernels in one parallel region, so it is used wherever every projection's
linear method and the attention backend say the step may stand in for them (``native_linear``,
``decodes_in_place``): bit for bit what the layer-by-layer forward computes. Anything else (prompt
rows, a projection on PyTorch's matmul, an int8 KV cache, tensor parallelism, no kernels yet) runs layer
by layer. The step is built at the first decode step that finds the kernels in use, and again if the
runner binds another KV cache.
"""
from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from autoglm.distributed.parallel_state import tp_size
from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.models.layers import RMSNorm
from autoglm.models.linear_method.base import NativeLinear

logger = logging.getLogger(__name__)

PROJECTIONS = {"qkv": ("self_attn", "qkv_proj"), "o": ("self_attn", "o_proj"),
               "gate_up": ("mlp", "gate_up_proj"), "down": ("mlp", "down_proj")}
NORMS = {"input_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
         "post_self_attn_norm": "post_self_attn_layernorm", "post_mlp_norm": "post_mlp_layernorm"}


class NativeDecodeStep:
    """Runs a ``DecoderForCausalLM``'s decode steps of at most ``max_rows`` sequences natively where it can."""

    def __init__(self, model: nn.Module, max_rows: int) -> None:
        self.model = model
        self.max_rows = max_rows
        self._step: Any = None
        self._built_for: tuple[object, int] | None = None  # the library and the cache the step reads

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor | None:
        """The final hidden states ``[rows, hidden]``, or None where this step must run layer by layer."""
        rows = input_ids.shape[0]
        context = self.model.model.layers[0].self_attn.attn.forward_context
        metadata = None if context is None else context.metadata
        if (metadata is None or not 0 < rows <= self.max_rows or metadata.num_decode_tokens != rows
                or metadata.num_rows != rows or input_ids.device.type != "cpu"):
            return None
        step = self._native_step(metadata.block_size)
        if step is None or rows > self.max_rows:
            return None
        angles = self.model.model.rotary_emb(positions, self.model.model.embed_tokens.weight.dtype)
        return step.forward(input_ids.contiguous(), angles.cos.flatten(1).contiguous(),
                            angles.sin.flatten(1).contiguous(), metadata.slot_mapping.contiguous(),
                            metadata.decode_block_tables().contiguous(), metadata.decode_seq_lens().contiguous())

    def _native_step(self, block_size: int) -> Any:
        """The compiled step for the library, KV cache and block size in use now, built once for each; None if
        none can be."""
        library = cpu_kernels()
        if library is None or not hasattr(library, "DecodeStep"):
            return None
        key = (library, self.model.model.layers[0].self_attn.attn.kv_cache.keys.data_ptr(), block_size)
        if self._built_for != key:
            self._built_for = key
            self._step = self._build(library, block_size)
        return self._step

    def _build(self, library: Any, block_size: int) -> Any:
        decoder, config = self.model.model, self.model.config
        dtype = decoder.embed_tokens.weight.dtype
        if tp_size() > 1 or dtype not in (torch.float32, torch.bfloat16):
            return None
        layers = [_describe_layer(layer, dtype) for layer in decoder.layers]
        if any(layer is None for layer in layers):
            return None
        self.max_rows = min(self.max_rows, *(linear.max_rows for layer in layers for linear in layer[0].values()))
        attention = decoder.layers[0].self_attn.attn
        sizes = {"hidden": config.hidden_size, "heads": attention.num_heads, "kv_heads": attention.num_kv_heads,
                 "head_dim": attention.head_dim, "intermediate": config.intermediate_size,
                 "rotary_dim": 2 * decoder.rotary_emb.inv_freq.numel(), "block_size": block_size,
                 "interleaved_rotary": decoder.rotary_emb.interleaved, "eps": config.rms_norm_eps,
                 "attention_scale": attention.scale}
        step = library.DecodeStep(decoder.embed_tokens.weight.detach(), decoder.norm.weight.detach(),
                                  [_arguments(linears, tensors) for linears, tensors in layers], sizes)
        logger.info("decode steps of up to %d sequences run the whole model as one native call", self.max_rows)
        return step


def _describe_layer(layer: nn.Module, dtype: torch.dtype
                    ) -> tuple[dict[str, NativeLinear], dict[str, torch.Tensor | None]] | None:
    """A decoder layer's projections as the native step reads them, and its norms and cache; None if any part
    cannot be read so."""
    linears = {}
    for name, (block, attribute) in PROJECTIONS.items():
        projection = getattr(getattr(layer, block), attribute)
        linears[name] = projection.linear_method.native_linear(projection)
        if linears[name] is None:
            return None
    attention = layer.self_attn.attn
    context = attention.forward_context
    if context is None or not context.backend.decodes_in_place(attention.kv_cache, dtype):
        return None
    tensors: dict[str, torch.Tensor | None] = {name: _norm_weight(getattr(layer, attribute))
                                               for name, attribute in NORMS.items()}
    tensors["q_norm"] = _norm_weight(layer.self_attn.q_norm)
    tensors["k_norm"] = _norm_weight(layer.self_attn.k_norm)
    tensors["k_cache"], tensors["v_cache"] = attention.kv_cache.keys, attention.kv_cache.values
    return linears, tensors


def _norm_weight(norm: nn.Module) -> torch.Tensor | None:
    """An RMSNorm's weight; None for the identity a family without that norm has in its place."""
    return norm.weight.detach() if isinstance(norm, RMSNorm) else None


def _arguments(linears: dict[str, NativeLinear], tensors: dict[str, torch.Tensor | None]) -> dict[str, object]:
    """One layer as ``DecodeStep`` takes it: each projection a tuple, the rest by name."""
    projections = {name: (linear.kind, linear.weight.detach(), linear.scales,
                          None if linear.bias is None else linear.bias.detach(), linear.bits, linear.group_size)
                   for name, linear in linears.items()}
    return {**projections, **tensors}
