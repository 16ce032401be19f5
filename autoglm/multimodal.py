"""Images a prompt carries: what the server hands the engine beside the prompt's token ids.

The server decodes and preprocesses each image with the checkpoint's own image processor and expands
its placeholder in the prompt into one image token per merged patch; the engine encodes the pixels
with the model's vision encoder and puts the result where those tokens stand.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class ImageInput:
    """One preprocessed image: its patches, their grid, and the identity of its content."""

    pixel_values: torch.Tensor  # [patches, channels * temporal_patch * patch * patch], float32, the processor's
    grid_thw: tuple[int, int, int]  # patches along time, height and width, before merging
    # A digest of the image's encoded bytes and of the preprocessing settings that change its pixels: the
    # same screenshot under the same settings hits the prefix and encoder caches, another image misses.
    content_hash: bytes


@dataclass(frozen=True, eq=False)
class MultiModalPrompt:
    """A prompt's images, in the order their placeholder runs stand in its token ids."""

    images: tuple[ImageInput, ...]
