"""Multimodal rotary embedding (M-RoPE): one rotary whose frequencies follow three positions.

GLM-4.1V and Qwen2.5-VL give every token a temporal, a height and a width position. The
rotary frequencies are cut into consecutive ``mrope_section`` groups, and group ``i`` takes
its phase from axis ``i % 3``. Everything else (inverse frequencies, scaling, layout, the
rotation itself) is the plain rotary's, so text, whose three positions are equal, turns
exactly as it would under :class:`RotaryEmbedding`.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from autoglm.models.model_config import ModelConfig
from autoglm.models.rotary import RotaryAngles, RotaryEmbedding, angles_from_frequencies

MROPE_AXES = 3  # temporal, height, width


def frequency_axes(mrope_section: Sequence[int], num_frequencies: int) -> torch.Tensor:
    """For each rotary frequency, the axis (0, 1 or 2) whose position sets its phase."""
    if not mrope_section or any(type(size) is not int or size <= 0 for size in mrope_section):
        raise ValueError(f"mrope_section must be a non-empty list of positive ints, got {list(mrope_section)}")
    if sum(mrope_section) != num_frequencies:
        raise ValueError(
            f"mrope_section {list(mrope_section)} covers {sum(mrope_section)} frequencies; "
            f"it must cover all {num_frequencies} (rotary_dim / 2)"
        )
    return torch.cat([torch.full((size,), group % MROPE_AXES, dtype=torch.int64)
                      for group, size in enumerate(mrope_section)])


def mrope_phases(positions: torch.Tensor, inv_freq: torch.Tensor, axes: torch.Tensor) -> torch.Tensor:
    """Float32 phases ``[T, len(inv_freq)]``: each frequency times its axis's position."""
    if positions.dim() != 2 or positions.shape[0] != MROPE_AXES:
        raise ValueError(f"M-RoPE positions must be [3, T] (temporal, height, width), got {tuple(positions.shape)}")
    if positions.is_floating_point() or positions.is_complex():
        raise ValueError(f"M-RoPE positions must be integers, got {positions.dtype}")
    phases = positions[:, :, None].float() * inv_freq.float()  # [3, T, F]
    return phases.take_along_dim(axes.to(phases.device).view(1, 1, -1), dim=0)[0]


class MultimodalRotaryEmbedding(RotaryEmbedding):
    """Turns three-axis positions ``[3, T]`` into :class:`RotaryAngles` in the model's layout."""

    def __init__(self, config: ModelConfig, interleaved: bool, mrope_section: Sequence[int]) -> None:
        super().__init__(config, interleaved)
        self.register_buffer("axes", frequency_axes(mrope_section, self.inv_freq.numel()), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> RotaryAngles:
        """Angles in float32, scaled, then cast to ``dtype``, as the plain rotary makes them."""
        phases = mrope_phases(positions, self.inv_freq, self.axes)
        return angles_from_frequencies(phases, self.attention_scaling, self.interleaved, dtype)
