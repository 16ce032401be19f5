"""Where each token sits on M-RoPE's three axes (temporal, height, width).

GLM-4.1V and Qwen2.5-VL share the rule for still images. Text advances all three axes
together, one per token. An image's tokens, a run of the image placeholder id (GLM-4.1V's
``<|image|>`` between ``<|begin_of_image|>`` and ``<|end_of_image|>``; Qwen2.5-VL's
``<|image_pad|>`` between ``<|vision_start|>`` and ``<|vision_end|>``), lie on their merged
patch grid: the temporal axis fixed at the image's start, height and width at its row and
column offset by that start. Text after an image resumes at that start plus the grid's longer
side. A still image is one temporal patch, so the temporal spacing videos get never applies.

Generated tokens continue on all three axes from their index plus the prompt's delta: the
largest prompt position plus one, minus the prompt's length.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autoglm.models.mrope import MROPE_AXES

ImageGrid = tuple[int, int, int]  # patches per image before merging: frames, rows, columns


def mrope_prompt_positions(token_ids: list[int], images: list[ImageGrid], image_token_id: int,
                           spatial_merge_size: int) -> tuple[torch.Tensor, int]:
    """Positions ``[3, len(token_ids)]`` (int64) of a prompt and the delta its generated tokens add.

    ``images`` holds each image's ``grid_thw`` in the order its placeholder run appears.
    """
    if not token_ids:
        raise ValueError("a prompt needs at least one token to place")
    if type(spatial_merge_size) is not int or spatial_merge_size <= 0:
        raise ValueError(f"spatial_merge_size must be a positive int, got {spatial_merge_size!r}")
    runs = _image_runs(token_ids, image_token_id)
    if len(runs) != len(images):
        raise ValueError(
            f"the prompt holds {len(runs)} runs of the image token {image_token_id} but {len(images)} "
            f"image grids were given; each image needs one run of its own"
        )
    pieces, position, text_start = [], 0, 0
    for number, ((start, end), grid) in enumerate(zip(runs, images)):
        rows, columns = _merged_rows_columns(number, grid, spatial_merge_size)
        if end - start != rows * columns:
            raise ValueError(
                f"image {number} has grid {tuple(grid)}, which merges to {rows} x {columns} = {rows * columns} "
                f"tokens, but its run of image tokens at {start}..{end - 1} holds {end - start}"
            )
        pieces.append(_text_positions(position, start - text_start))
        position += start - text_start
        pieces.append(_image_positions(position, rows, columns))
        position += max(rows, columns)
        text_start = end
    pieces.append(_text_positions(position, len(token_ids) - text_start))
    positions = torch.cat(pieces, dim=1)
    return positions, int(positions.max()) + 1 - len(token_ids)


def mrope_decode_positions(indices: torch.Tensor, deltas: torch.Tensor | int) -> torch.Tensor:
    """Positions ``[3, T]`` of tokens after the prompt at sequence ``indices`` ``[T]``: ``index + delta``
    on every axis, with ``deltas`` one per token (tokens of different requests) or shared."""
    if indices.dim() != 1 or indices.is_floating_point() or indices.is_complex():
        raise ValueError(f"indices must be a 1-D integer tensor, got {indices.dtype} {tuple(indices.shape)}")
    return (indices + deltas).expand(MROPE_AXES, -1)


def _image_runs(token_ids: list[int], image_token_id: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each maximal run of ``image_token_id``."""
    is_image = F.pad((torch.tensor(token_ids) == image_token_id).to(torch.int8), (1, 1))
    edges = is_image.diff()
    starts = (edges == 1).nonzero().flatten().tolist()
    ends = (edges == -1).nonzero().flatten().tolist()
    return list(zip(starts, ends))


def _merged_rows_columns(number: int, grid: ImageGrid, spatial_merge_size: int) -> tuple[int, int]:
    """An image's token rows and columns after the merger fuses ``m x m`` patches."""
    if not isinstance(grid, (tuple, list)) or len(grid) != 3 or any(type(size) is not int for size in grid):
        raise ValueError(f"image {number}: grid_thw must be three ints (frames, rows, columns), got {grid!r}")
    frames, rows, columns = grid
    if frames != 1:
        raise ValueError(f"image {number}: a still image has one temporal patch (grid t = 1), got {frames}")
    if rows <= 0 or columns <= 0 or rows % spatial_merge_size or columns % spatial_merge_size:
        raise ValueError(
            f"image {number}: grid rows and columns must be positive multiples of the merge size "
            f"{spatial_merge_size}, got {rows} x {columns}"
        )
    return rows // spatial_merge_size, columns // spatial_merge_size


def _text_positions(start: int, length: int) -> torch.Tensor:
    return torch.arange(start, start + length).expand(MROPE_AXES, -1)


def _image_positions(start: int, rows: int, columns: int) -> torch.Tensor:
    row, column = torch.meshgrid(torch.arange(rows), torch.arange(columns), indexing="ij")
    return torch.stack((torch.zeros_like(row), row, column)).flatten(1) + start
