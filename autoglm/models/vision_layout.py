"""Where each patch of a batch of images sits, and the 2-D rotary angles built from it.

The image processor orders each image's patches merge window by merge window (the ``m x m``
patches the merger fuses are consecutive), so a patch's row and column follow from its index
and its image's grid. Half of each head turns with the row, half with the column.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.models.rotary import RotaryAngles


@dataclass(frozen=True)
class PatchLayout:
    """Each patch's place: its row and column, its frame's grid size, and the frames' lengths.

    A frame is what attends to itself alone: an image, or one frame (of ``h x w`` patches) of a
    ``grid_thw`` row with ``t > 1``, as transformers feeds a video's frames to these towers.
    """

    rows: torch.Tensor  # [num_patches] long
    columns: torch.Tensor  # [num_patches] long
    grid_heights: torch.Tensor  # [num_patches] float32
    grid_widths: torch.Tensor  # [num_patches] float32
    frame_lengths: list[int]

    @classmethod
    def from_grid(cls, grid_thw: torch.Tensor, merge_size: int, device: torch.device) -> PatchLayout:
        """The layout of ``grid_thw`` ``[num_images, 3]`` (frames, rows, columns of patches per image)."""
        if grid_thw.dim() != 2 or grid_thw.shape[1] != 3 or grid_thw.shape[0] == 0:
            raise ValueError(f"grid_thw must be [num_images, 3] with at least one image, got {tuple(grid_thw.shape)}")
        if grid_thw.is_floating_point() or grid_thw.is_complex():
            raise ValueError(f"grid_thw must hold integers (patch counts), got {grid_thw.dtype}")
        rows, columns, heights, widths, frame_lengths = [], [], [], [], []
        for image, (frames, height, width) in enumerate(grid_thw.tolist()):
            if min(frames, height, width) <= 0 or height % merge_size or width % merge_size:
                raise ValueError(
                    f"grid_thw row {image} is {[frames, height, width]}: frames, rows and columns must be "
                    f"positive, rows and columns multiples of the merge size {merge_size}"
                )
            window = (height // merge_size, merge_size, width // merge_size, merge_size)
            row_grid, column_grid = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
            rows.append(row_grid.reshape(window).transpose(1, 2).flatten().repeat(frames))
            columns.append(column_grid.reshape(window).transpose(1, 2).flatten().repeat(frames))
            heights.append(torch.full((frames * height * width,), float(height)))
            widths.append(torch.full((frames * height * width,), float(width)))
            frame_lengths.extend([height * width] * frames)
        return cls(torch.cat(rows).to(device), torch.cat(columns).to(device), torch.cat(heights).to(device),
                   torch.cat(widths).to(device), frame_lengths)

    @property
    def num_patches(self) -> int:
        return self.rows.shape[0]

    def check_pixel_values(self, pixel_values: torch.Tensor, patch_features: int) -> None:
        """Refuse ``pixel_values`` that are not one flattened patch per patch of this layout."""
        if pixel_values.dim() != 2 or pixel_values.shape != (self.num_patches, patch_features):
            raise ValueError(
                f"pixel_values must be [num_patches, channels x frames x patch x patch] = "
                f"[{self.num_patches}, {patch_features}] for the grid_thw given, got {tuple(pixel_values.shape)}"
            )


def vision_rotary_angles(layout: PatchLayout, head_dim: int, theta: float) -> RotaryAngles:
    """Float32 angles over whole heads in the rotate-half layout: each half holds the row's
    frequencies then the column's, ``head_dim / 4`` of each."""
    axis_dim = head_dim // 2
    inv_freq = 1.0 / theta ** (torch.arange(0, axis_dim, 2, dtype=torch.float32, device=layout.rows.device) / axis_dim)
    half = torch.cat((layout.rows[:, None] * inv_freq, layout.columns[:, None] * inv_freq), dim=-1)
    angles = torch.cat((half, half), dim=-1)[:, None, :]
    return RotaryAngles(cos=angles.cos(), sin=angles.sin(), interleaved=False)
