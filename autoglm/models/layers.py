"""The blocks a decoder layer is built from: norm, gated MLP, self-attention, embedding."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.fused_ops import fused_kernels, silu_and_mul
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.model_config import ModelConfig
from autoglm.models.parallel_linear import output_linear, stacked_linear
from autoglm.models.parameters import checkpoint_parameter
from autoglm.models.partition import ModelPartition
from autoglm.models.rotary import RotaryAngles
from autoglm.models.shard import Shard
from autoglm.attention import Attention

SUPPORTED_ACTIVATIONS = ("silu", "swish")  # transformers treats both names as SiLU


class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dim, computed in float32 as transformers does."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = checkpoint_parameter(size)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernels = fused_kernels(x, self.weight)
        if kernels is not None:
            return kernels.rms_norm(x, self.weight, self.eps)
        # One fused kernel instead of five; in float32 it equals x * rsqrt(mean(x^2) + eps) exactly.
        normalised = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * normalised.to(x.dtype)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(norm(residual + x), residual + x)``; ``residual`` None means ``x`` is the whole stream.

        The fused kernel writes both results over ``x`` and ``residual``: callers pass tensors
        nothing else reads.
        """
        if residual is None:
            return self(x), x
        kernels = fused_kernels(x, residual, self.weight)
        if kernels is not None and x.is_contiguous() and residual.is_contiguous():
            kernels.fused_add_rms_norm(x, residual, self.weight, self.eps)
            return x, residual
        residual = residual + x
        return self(residual), residual


class Embedding(nn.Module):
    """Token id to vector; its ``weight`` ``[vocab, hidden]`` can double as a tied LM head."""

    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__()
        self.weight = checkpoint_parameter(vocab_size, hidden_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.weight)


def check_hidden_act(config: ModelConfig) -> None:
    """Refuse an MLP activation other than SiLU, which every MLP here computes."""
    if config.hidden_act not in SUPPORTED_ACTIVATIONS:
        raise ValueError(
            f"unsupported hidden_act '{config.hidden_act}'; supported: {', '.join(SUPPORTED_ACTIVATIONS)}"
        )


class GatedMLP(nn.Module):
    """``down(silu(gate(x)) * up(x))`` with gate and up fused into one projection; ``inner`` is the slice of
    the intermediate size this rank computes (all of it outside tensor parallelism). Without ``reduce_output``
    a rank's partial output is the caller's to sum across ranks."""

    def __init__(self, config: ModelConfig, bias: bool, linear_method: LinearMethodBase, inner: Shard,
                 reduce_output: bool = True) -> None:
        super().__init__()
        check_hidden_act(config)
        self.gate_up_proj = stacked_linear(config.hidden_size, {"gate_proj": inner, "up_proj": inner}, bias,
                                           linear_method)
        self.down_proj = output_linear(inner, config.hidden_size, bias, linear_method, reduce_output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(silu_and_mul(self.gate_up_proj(x)))


class SelfAttention(nn.Module):
    """Fused q/k/v projection, optional per-head q/k norm, rotary, paged attention, output projection;
    under tensor parallelism over this rank's heads only (and their KV cache)."""

    def __init__(self, config: ModelConfig, qkv_bias: bool, output_bias: bool, qk_norm: bool,
                 linear_method: LinearMethodBase, partition: ModelPartition) -> None:
        super().__init__()
        self.num_heads = partition.num_heads
        self.num_kv_heads = partition.num_kv_heads
        self.head_dim = config.head_dim
        query, key_value = partition.query, partition.key_value
        self.qkv_proj = stacked_linear(
            config.hidden_size, {"q_proj": query, "k_proj": key_value, "v_proj": key_value}, qkv_bias, linear_method
        )
        self.o_proj = output_linear(query, config.hidden_size, output_bias, linear_method)
        self.q_norm: nn.Module = RMSNorm(self.head_dim, config.rms_norm_eps) if qk_norm else nn.Identity()
        self.k_norm: nn.Module = RMSNorm(self.head_dim, config.rms_norm_eps) if qk_norm else nn.Identity()
        self.attn = Attention(self.num_heads, self.num_kv_heads, self.head_dim, scale=self.head_dim**-0.5)

    def forward(self, hidden: torch.Tensor, angles: RotaryAngles) -> torch.Tensor:
        num_tokens = hidden.shape[0]
        q, k, v = self.qkv_proj(hidden).split(self.qkv_proj.part_sizes, dim=-1)
        q = self.q_norm(q.view(num_tokens, self.num_heads, self.head_dim))
        k = self.k_norm(k.view(num_tokens, self.num_kv_heads, self.head_dim))
        v = v.view(num_tokens, self.num_kv_heads, self.head_dim)
        q, k = angles.rotate_query_key(q, k)
        return self.o_proj(self.attn(q, k, v))
