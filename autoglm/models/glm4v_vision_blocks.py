"""The blocks of the GLM-4.1V vision tower: bidirectional attention within each frame, gated MLPs,
and the patch merger. Module names follow the checkpoint's (``blocks.N.attn.qkv``, ``merger.proj``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.fused_ops import silu_and_mul
from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.layers import SUPPORTED_ACTIVATIONS, RMSNorm
from autoglm.models.linear import Linear, MergedLinear
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.rotary import RotaryAngles


class VisionGatedMLP(nn.Module):
    """``down(silu(gate(x)) * up(x))``, gate and up fused; loads from split ``gate_proj`` and ``up_proj``."""

    def __init__(self, size: int, inner_size: int, hidden_act: str, linear_method: LinearMethodBase) -> None:
        super().__init__()
        if hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"unsupported vision hidden_act '{hidden_act}'; supported: {', '.join(SUPPORTED_ACTIVATIONS)}"
            )
        self.gate_up_proj = MergedLinear(size, {"gate_proj": inner_size, "up_proj": inner_size}, False,
                                         linear_method)
        self.down_proj = Linear(inner_size, size, False, linear_method)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(silu_and_mul(self.gate_up_proj(x)))


class VisionAttention(nn.Module):
    """Every patch attends to every patch of its own frame, none of another: one
    ``scaled_dot_product_attention`` per frame, no mask, no cache."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        size = config.hidden_size
        self.qkv = MergedLinear(size, {"q": size, "k": size, "v": size}, config.attention_bias, linear_method)
        self.proj = Linear(size, size, False, linear_method)

    def forward(self, hidden: torch.Tensor, angles: RotaryAngles, frame_lengths: list[int]) -> torch.Tensor:
        num_patches = hidden.shape[0]
        q, k, v = self.qkv(hidden).view(num_patches, 3, self.num_heads, self.head_dim).unbind(1)
        # Rotated in float32 whatever the model's dtype, as transformers does.
        q, k = angles.rotate(q.float()).to(v.dtype), angles.rotate(k.float()).to(v.dtype)
        frames = zip(*(x.transpose(0, 1).split(frame_lengths, dim=1) for x in (q, k, v)))
        attended = torch.cat([F.scaled_dot_product_attention(fq, fk, fv) for fq, fk, fv in frames], dim=1)
        return self.proj(attended.transpose(0, 1).reshape(num_patches, -1))


class VisionBlock(nn.Module):
    """Pre-norm attention then pre-norm MLP, each added to the stream."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.norm1 = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.norm2 = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.attn = VisionAttention(config, linear_method)
        self.mlp = VisionGatedMLP(config.hidden_size, config.out_hidden_size, config.hidden_act, linear_method)

    def forward(self, hidden: torch.Tensor, angles: RotaryAngles, frame_lengths: list[int]) -> torch.Tensor:
        hidden = hidden + self.attn(self.norm1(hidden), angles, frame_lengths)
        return hidden + self.mlp(self.norm2(hidden))


class PatchMerger(VisionGatedMLP):
    """The last step into the decoder's space: a projection, LayerNorm and GELU, then a gated MLP."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase) -> None:
        size = config.out_hidden_size
        super().__init__(size, config.intermediate_size, config.hidden_act, linear_method)
        self.proj = Linear(size, size, False, linear_method)
        self.post_projection_norm = nn.LayerNorm(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.gelu(self.post_projection_norm(self.proj(x))))
