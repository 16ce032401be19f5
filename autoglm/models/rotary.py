"""Rotary position embedding: angles computed once per forward, applied in every layer.

Two layouts exist. Llama, Qwen and GLM-4.5 rotate the two halves of the rotated dims against
each other ("rotate half"); GLM-4 rotates interleaved pairs (0,1), (2,3), .... GLM-4 and GLM-4.5
rotate only the first ``head_dim * partial_rotary_factor`` dims of each head, passing the rest
through unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.fused_ops import fused_kernels
from autoglm.models.model_config import ModelConfig
from autoglm.models.rope_scaling import rope_frequencies


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


@dataclass
class RotaryAngles:
    """cos and sin for one forward's positions, ``[T, 1, rotary_dim]`` in the model's dtype."""

    cos: torch.Tensor
    sin: torch.Tensor
    interleaved: bool

    def rotate_query_key(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` and ``k`` rotated; the fused kernel rotates them in place, so pass tensors nothing else reads."""
        kernels = fused_kernels(q, k, self.cos)
        if kernels is not None and q.stride(-1) == 1 and k.stride(-1) == 1:
            kernels.rotary_(q, k, self.cos.flatten(1), self.sin.flatten(1), self.interleaved)
            return q, k
        return self.rotate(q), self.rotate(k)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` of shape ``[T, heads, head_dim]`` by each token's position."""
        rotary_dim = self.cos.shape[-1]
        rotary_part = x[..., :rotary_dim]
        turned = _rotate_pairs(rotary_part) if self.interleaved else _rotate_half(rotary_part)
        rotated = rotary_part * self.cos + turned * self.sin
        if rotary_dim == x.shape[-1]:
            return rotated
        return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


class RotaryEmbedding(nn.Module):
    """Turns positions into :class:`RotaryAngles`; holds only the float32 inverse frequencies."""

    def __init__(self, config: ModelConfig, interleaved: bool) -> None:
        super().__init__()
        rotary_dim = int(config.head_dim * config.rope.partial_rotary_factor)
        if rotary_dim <= 0 or rotary_dim % 2:
            raise ValueError(
                f"rotary dims (head_dim {config.head_dim} x partial_rotary_factor "
                f"{config.rope.partial_rotary_factor}) must be a positive even number, got {rotary_dim}"
            )
        inv_freq, self.attention_scaling = rope_frequencies(config.rope, rotary_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.interleaved = interleaved

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> RotaryAngles:
        """Angles in float32, scaled, then cast to ``dtype``, in the order transformers uses."""
        freqs = positions[:, None].float() * self.inv_freq.float()
        return angles_from_frequencies(freqs, self.attention_scaling, self.interleaved, dtype)


def angles_from_frequencies(freqs: torch.Tensor, attention_scaling: float, interleaved: bool,
                            dtype: torch.dtype) -> RotaryAngles:
    """Angles from each token's float32 phases ``[T, rotary_dim // 2]``, laid out for the rotation
    ``interleaved`` names; shared so that every way of choosing phases rounds the same."""
    if interleaved:
        angles = freqs.repeat_interleave(2, dim=-1)
    else:
        angles = torch.cat((freqs, freqs), dim=-1)
    cos = (angles.cos() * attention_scaling).to(dtype)
    sin = (angles.sin() * attention_scaling).to(dtype)
    return RotaryAngles(cos=cos[:, None, :], sin=sin[:, None, :], interleaved=interleaved)
