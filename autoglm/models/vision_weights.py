"""The vision tower's tensors of a full vision-language checkpoint, under the encoders' names.

Transformers 5 writes them under ``model.visual.`` or, converting back to a model's original
names, ``visual.``; earlier checkpoints use either. The patch embedding's Conv3d kernel is
flattened into the linear over flattened patches that the encoders hold.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from autoglm.models.vision_config import VisionTowerConfig

VISION_PREFIXES = ("model.visual.", "visual.")
# Transformers 5's prefix of a vision-language model's decoder; the engine names it ``model.`` as a text model's.
_LANGUAGE_MODEL_PREFIX = "model.language_model."
_PATCH_EMBED_WEIGHT = "patch_embed.proj.weight"


def decoder_name(name: str) -> str:
    """A checkpoint's (or a PEFT adapter's) name of a decoder module or tensor as the engine names it: transformers
    5's ``model.language_model.`` prefix as ``model.``; any other name as it is."""
    if name.startswith(_LANGUAGE_MODEL_PREFIX):
        return "model." + name.removeprefix(_LANGUAGE_MODEL_PREFIX)
    return name


def vision_tower_weights(weights: Iterable[tuple[str, torch.Tensor]],
                         config: VisionTowerConfig) -> Iterator[tuple[str, torch.Tensor]]:
    """The vision tower's tensors with their prefix dropped, the patch kernel flattened; the rest skipped."""
    for name, tensor in weights:
        prefix = next((prefix for prefix in VISION_PREFIXES if name.startswith(prefix)), None)
        if prefix is None:
            continue
        name = name.removeprefix(prefix)
        if name == _PATCH_EMBED_WEIGHT:
            kernel = checked_kernel(name, tensor, (config.in_channels, config.temporal_patch_size,
                                                   config.patch_size, config.patch_size))
            tensor = kernel.reshape(kernel.shape[0], -1)
        yield name, tensor


def checked_kernel(name: str, kernel: torch.Tensor, expected: tuple[int, ...]) -> torch.Tensor:
    """``kernel`` itself, once its shape past the output channels is checked against ``expected``."""
    if kernel.dim() != len(expected) + 1 or tuple(kernel.shape[1:]) != expected:
        raise ValueError(f"checkpoint tensor '{name}' has shape {tuple(kernel.shape)}, but the encoder expects "
                         f"[out_channels, {', '.join(map(str, expected))}]")
    return kernel
