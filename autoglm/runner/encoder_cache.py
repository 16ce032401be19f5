"""Encoded images kept on the device by content hash, between the steps that read their rows.

A prompt's image may be read over several steps (its placeholders split by a prefix-cache hit or
a preemption's recompute), and the same image by several prompts; the engine says in each plan
which images to encode and which to drop (see :mod:`autoglm.engine.step_images`), so this cache
holds what the engine's record says it holds.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from autoglm.device_transfer import to_device
from autoglm.models.image_embeddings import ImageEmbeddings
from autoglm.multimodal import ImageInput
from autoglm.step_plan import StepPlan

ImageEncoder = Callable[[list[ImageInput]], list[torch.Tensor]]  # one call: each image's rows, in order


class EncoderCache:
    """The encoded rows of each image by its key, and the count of encoder calls (one per step at most)."""

    def __init__(self, encode: ImageEncoder, device: torch.device) -> None:
        self._encode = encode
        self._device = device
        self.rows: dict[bytes, torch.Tensor] = {}
        self.num_encoder_calls = 0

    def step_embeddings(self, plan: StepPlan) -> ImageEmbeddings | None:
        """Encode ``plan``'s new images in one call, gather the rows its placeholder tokens take, then apply its
        drops; None when it reads no image."""
        if plan.encode_images:
            self.num_encoder_calls += 1
            encoded = self._encode(plan.encode_images)
            self.rows.update((image.content_hash, rows) for image, rows in zip(plan.encode_images, encoded))
        embeddings = self._gather(plan) if plan.image_rows else None
        for key in plan.drop_images:
            self.rows.pop(key, None)
        return embeddings

    def _gather(self, plan: StepPlan) -> ImageEmbeddings:
        missing = [entry.key.hex() for entry in plan.image_rows if entry.key not in self.rows]
        if missing:
            raise ValueError(f"the plan reads images the runner does not hold: {', '.join(missing)}")
        rows = torch.cat([self.rows[entry.key][entry.first_row:entry.first_row + entry.num_rows]
                          for entry in plan.image_rows])
        token_indices = [entry.token_index + offset for entry in plan.image_rows for offset in range(entry.num_rows)]
        return ImageEmbeddings(to_device(token_indices, self._device), rows)
