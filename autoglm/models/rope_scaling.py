"""Rotary inverse frequencies for each supported RoPE scaling type.

Each formula follows transformers' ``modeling_rope_utils`` step for step, in float32, so
that positions map to exactly the angles the checkpoint was trained with.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from autoglm.models.model_config import RopeConfig

RopeFrequencies = tuple[torch.Tensor, float]  # inverse frequencies [rotary_dim // 2], attention scaling


def _base_inverse_frequencies(theta: float, rotary_dim: int) -> torch.Tensor:
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(torch.float32) / rotary_dim
    return 1.0 / (theta**exponents)


def _require_factor(rope: RopeConfig) -> float:
    if rope.factor is None:
        raise ValueError(f"rope type '{rope.rope_type}' needs a 'factor' in the rope settings")
    return float(rope.factor)


def _default(rope: RopeConfig, rotary_dim: int) -> RopeFrequencies:
    return _base_inverse_frequencies(rope.theta, rotary_dim), 1.0


def _linear(rope: RopeConfig, rotary_dim: int) -> RopeFrequencies:
    """Position interpolation: every frequency slowed by the same factor."""
    return _base_inverse_frequencies(rope.theta, rotary_dim) / _require_factor(rope), 1.0


def _llama3(rope: RopeConfig, rotary_dim: int) -> RopeFrequencies:
    """Slow only the long wavelengths, with a smooth blend between the two bands."""
    factor = _require_factor(rope)
    if rope.low_freq_factor is None or rope.high_freq_factor is None:
        raise ValueError(
            "rope type 'llama3' needs 'low_freq_factor' and 'high_freq_factor' in the rope settings"
        )
    low_freq_factor, high_freq_factor = rope.low_freq_factor, rope.high_freq_factor
    old_context = rope.original_max_position_embeddings
    low_freq_wavelength = old_context / low_freq_factor
    high_freq_wavelength = old_context / high_freq_factor

    inv_freq = _base_inverse_frequencies(rope.theta, rotary_dim)
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > low_freq_wavelength, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelength < high_freq_wavelength) * ~(wavelength > low_freq_wavelength)
    return torch.where(is_medium, smoothed, scaled), 1.0


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_correction_dim(rotations: float, rotary_dim: int, theta: float, context: int) -> float:
    """The dimension whose wavelength fits ``rotations`` times into the original context."""
    return (rotary_dim * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(theta))


def _yarn(rope: RopeConfig, rotary_dim: int) -> RopeFrequencies:
    """Interpolate long wavelengths, keep short ones, ramp linearly in between; scale attention."""
    old_context = rope.original_max_position_embeddings
    factor = _require_factor(rope)
    attention_factor = rope.attention_factor
    if attention_factor is None:
        if rope.mscale and rope.mscale_all_dim:
            attention_factor = _yarn_mscale(factor, rope.mscale) / _yarn_mscale(factor, rope.mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    beta_fast = rope.beta_fast or 32
    beta_slow = rope.beta_slow or 1

    low = _yarn_correction_dim(beta_fast, rotary_dim, rope.theta, old_context)
    high = _yarn_correction_dim(beta_slow, rotary_dim, rope.theta, old_context)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # keep the ramp finite

    positional = rope.theta ** (torch.arange(0, rotary_dim, 2).to(torch.float32) / rotary_dim)
    extrapolated = 1.0 / positional
    interpolated = 1.0 / (factor * positional)
    ramp = torch.clamp((torch.arange(rotary_dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    keep_extrapolated = 1 - ramp
    inv_freq = interpolated * (1 - keep_extrapolated) + extrapolated * keep_extrapolated
    return inv_freq, float(attention_factor)


_ROPE_TYPES: dict[str, Callable[[RopeConfig, int], RopeFrequencies]] = {
    "default": _default,
    "linear": _linear,
    "llama3": _llama3,
    "yarn": _yarn,
}
SUPPORTED_ROPE_TYPES = tuple(_ROPE_TYPES)


def rope_frequencies(rope: RopeConfig, rotary_dim: int) -> RopeFrequencies:
    """Inverse frequencies (float32) for ``rotary_dim`` dims and the factor applied to cos/sin."""
    compute = _ROPE_TYPES.get(rope.rope_type)
    if compute is None:
        raise ValueError(
            f"unsupported rope type '{rope.rope_type}'; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    return compute(rope, rotary_dim)
