"""The pieces the vision towers share: the patch embedding, bidirectional attention within each
segment of patches, gated MLPs and the pre-norm block around them. Module names follow the
checkpoints' (``patch_embed.proj``, ``blocks.N.attn.qkv``, ``blocks.N.mlp.down_proj``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.fused_ops import silu_and_mul
from autoglm.models.layers import SUPPORTED_ACTIVATIONS, RMSNorm
from autoglm.models.linear import Linear, MergedLinear
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.rotary import RotaryAngles
from autoglm.models.vision_config import VisionBlockSettings, VisionTowerConfig


class PatchEmbedding(nn.Module):
    """The checkpoint's Conv3d over each patch (kernel == stride), as the linear it is:
    ``proj`` ``[hidden, C * T * P * P]`` over flattened patches."""

    def __init__(self, config: VisionTowerConfig, bias: bool, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.proj = Linear(config.patch_features, config.hidden_size, bias, linear_method)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values)


class VisionGatedMLP(nn.Module):
    """``down(silu(gate(x)) * up(x))``, gate and up fused; loads from split ``gate_proj`` and ``up_proj``."""

    def __init__(self, size: int, inner_size: int, hidden_act: str, bias: bool,
                 linear_method: LinearMethodBase) -> None:
        super().__init__()
        if hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"unsupported vision hidden_act '{hidden_act}'; supported: {', '.join(SUPPORTED_ACTIVATIONS)}"
            )
        self.gate_up_proj = MergedLinear(size, {"gate_proj": inner_size, "up_proj": inner_size}, bias,
                                         linear_method)
        self.down_proj = Linear(inner_size, size, bias, linear_method)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(silu_and_mul(self.gate_up_proj(x)))


class VisionAttention(nn.Module):
    """Every patch attends to every patch of its own segment (a frame, or a window of one), none
    of another: one ``scaled_dot_product_attention`` per segment, no mask, no cache."""

    def __init__(self, settings: VisionBlockSettings, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.num_heads = settings.num_heads
        self.head_dim = settings.head_dim
        size = settings.hidden_size
        self.qkv = MergedLinear(size, {"q": size, "k": size, "v": size}, settings.qkv_bias, linear_method)
        self.proj = Linear(size, size, settings.proj_bias, linear_method)

    def forward(self, hidden: torch.Tensor, angles: RotaryAngles, segment_lengths: list[int]) -> torch.Tensor:
        num_patches = hidden.shape[0]
        q, k, v = self.qkv(hidden).view(num_patches, 3, self.num_heads, self.head_dim).unbind(1)
        # Rotated in float32 whatever the model's dtype, as transformers does.
        q, k = angles.rotate(q.float()).to(v.dtype), angles.rotate(k.float()).to(v.dtype)
        segments = zip(*(x.transpose(0, 1).split(segment_lengths, dim=1) for x in (q, k, v)))
        attended = torch.cat([F.scaled_dot_product_attention(sq, sk, sv) for sq, sk, sv in segments], dim=1)
        return self.proj(attended.transpose(0, 1).reshape(num_patches, -1))


class VisionBlock(nn.Module):
    """Pre-norm attention then pre-norm MLP, each added to the stream."""

    def __init__(self, settings: VisionBlockSettings, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.norm1 = RMSNorm(settings.hidden_size, settings.rms_norm_eps)
        self.norm2 = RMSNorm(settings.hidden_size, settings.rms_norm_eps)
        self.attn = VisionAttention(settings, linear_method)
        self.mlp = VisionGatedMLP(settings.hidden_size, settings.mlp_size, settings.hidden_act, settings.mlp_bias,
                                  linear_method)

    def forward(self, hidden: torch.Tensor, angles: RotaryAngles, segment_lengths: list[int]) -> torch.Tensor:
        hidden = hidden + self.attn(self.norm1(hidden), angles, segment_lengths)
        return hidden + self.mlp(self.norm2(hidden))
