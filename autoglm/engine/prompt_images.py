"""A prompt's images as a sequence keeps them: where each one's placeholder run stands, and the
prompt's three-axis rotary positions with the delta its later tokens add.

Built once per request, after every check a bad image could fail (each message names what is
wrong and what is allowed), and shared by the request's n sequences.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.errors import InvalidRequestError
from autoglm.models.image_input_spec import ImageInputSpec
from autoglm.models.mrope_positions import mrope_decode_positions, mrope_prompt_positions
from autoglm.multimodal import ImageInput, MultiModalPrompt


@dataclass(frozen=True, eq=False)
class PromptImage:
    """One image and its run of placeholder tokens: ``length`` tokens from ``offset``, one per encoder row."""

    input: ImageInput
    offset: int
    length: int

    @property
    def key(self) -> bytes:
        """Its encoder rows' key in the runner's cache, and its share of a block's prefix-cache hash."""
        return self.input.content_hash

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, eq=False)
class PromptVision:
    """A prompt's images in placeholder order, its positions ``[3, prompt_len]`` and their delta."""

    images: tuple[PromptImage, ...]
    positions: torch.Tensor
    delta: int

    @classmethod
    def build(cls, token_ids: list[int], multi_modal: MultiModalPrompt | None,
              spec: ImageInputSpec | None) -> PromptVision | None:
        """The checked images of a prompt; None where it has no images and no placeholders, as every prompt
        to a text-only model must."""
        images = () if multi_modal is None else tuple(multi_modal.images)
        if spec is None:
            if images:
                raise InvalidRequestError(f"this model takes no images, but the prompt has {len(images)}; "
                                          "send text only, or serve a vision-language model")
            return None
        runs = _placeholder_runs(token_ids, spec.image_token_id)
        if len(runs) != len(images):
            raise InvalidRequestError(
                f"the prompt holds {len(runs)} runs of the image placeholder token {spec.image_token_id} but "
                f"{len(images)} images; each image needs exactly one run of placeholders, in image order")
        if not images:
            return None
        prompt_images = tuple(_checked_image(number, image, run, spec)
                              for number, (image, run) in enumerate(zip(images, runs)))
        positions, delta = mrope_prompt_positions(token_ids, [image.grid_thw for image in images],
                                                  spec.image_token_id, spec.spatial_merge_size)
        return cls(prompt_images, positions, delta)

    def rotary_positions(self, start: int, end: int) -> torch.Tensor:
        """Positions ``[3, end - start]`` of sequence indices ``start..end-1``: the prompt's from its table,
        later tokens' ``index + delta`` on every axis."""
        prompt_len = self.positions.shape[1]
        later = mrope_decode_positions(torch.arange(max(start, prompt_len), max(end, prompt_len)), self.delta)
        return torch.cat((self.positions[:, start:min(end, prompt_len)], later), dim=1)

    def chunk_end(self, start: int, end: int) -> int:
        """Where a chunk of sequence indices from ``start`` to at most ``end`` stops so that it ends inside
        no image's placeholders: before the image it would cut, or, if the chunk begins at or inside that
        image, past its whole run, which may take more tokens than ``end - start`` allowed."""
        for image in self.images:
            if image.offset < end < image.end:
                return image.end if start >= image.offset else image.offset
        return end

    def images_within(self, start: int, end: int) -> list[tuple[PromptImage, int, int]]:
        """Each image with placeholders among sequence indices ``start..end-1``: the image, its first such
        row, and how many there are."""
        overlaps = []
        for image in self.images:
            first, last = max(start, image.offset), min(end, image.end)
            if first < last:
                overlaps.append((image, first - image.offset, last - first))
        return overlaps

    def block_digest(self, start: int, end: int) -> bytes:
        """What a block of indices ``start..end-1`` adds to its prefix-cache hash: the content hash and offset
        of each image with placeholders in it, so that another image of the same size misses."""
        return b"".join(image.key + image.offset.to_bytes(8, "little")
                        for image, _, _ in self.images_within(start, end))


def _placeholder_runs(token_ids: list[int], image_token_id: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each maximal run of the placeholder token."""
    runs: list[tuple[int, int]] = []
    for index, token_id in enumerate(token_ids):
        if token_id != image_token_id:
            continue
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    return runs


def _checked_image(number: int, image: ImageInput, run: tuple[int, int], spec: ImageInputSpec) -> PromptImage:
    """The image at its placeholder run, once its grid, its run's length and its pixels' shape agree."""
    grid = image.grid_thw
    merge = spec.spatial_merge_size
    if not (isinstance(grid, tuple) and len(grid) == 3 and all(type(size) is int and size > 0 for size in grid)):
        raise InvalidRequestError(f"image {number}: grid_thw must be three positive ints (frames, rows, columns), "
                                  f"got {grid!r}")
    frames, rows, columns = grid
    if frames != 1 or rows % merge or columns % merge:
        raise InvalidRequestError(f"image {number}: grid_thw must be one frame of rows and columns that are "
                                  f"multiples of the merge size {merge}, got {grid}")
    num_patches = frames * rows * columns
    start, end = run
    if end - start != num_patches // merge ** 2:
        raise InvalidRequestError(
            f"image {number}: its run of placeholder tokens at {start}..{end - 1} holds {end - start} tokens, but "
            f"its grid {grid} merges to {num_patches} / {merge}^2 = {num_patches // merge ** 2}")
    pixels = image.pixel_values
    if not isinstance(pixels, torch.Tensor) or tuple(pixels.shape) != (num_patches, spec.patch_features) \
            or not pixels.is_floating_point():
        shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
        raise InvalidRequestError(
            f"image {number}: pixel_values must be a float tensor of [patches, features] = "
            f"[{num_patches}, {spec.patch_features}] for grid {grid}, got {shape}")
    if not isinstance(image.content_hash, bytes) or not image.content_hash:
        raise InvalidRequestError(f"image {number}: content_hash must be non-empty bytes")
    return PromptImage(image, start, end - start)
