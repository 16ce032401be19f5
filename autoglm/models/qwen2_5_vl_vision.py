"""The vision encoder of Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``): image patches in,
one embedding in the decoder's hidden size out per ``m x m`` merge unit of patches.

It takes what the transformers image processor returns: ``pixel_values`` ``[num_patches,
C * T * P * P]`` and ``grid_thw`` ``[num_images, 3]``, several images of any sizes in one call,
and returns ``[num_patches / m^2, out_hidden_size]`` in the same order, image after image.
Most blocks attend within square windows of ``window_size`` pixels, the blocks of
``fullatt_block_indexes`` within the whole frame; so that every window is contiguous, the merge
units are regrouped window by window before the blocks and put back in order after the merger.
Every projection multiplies through the one linear method the encoder is built with, so a
quantized method applies to all of them.

Under tensor parallelism the encoder is replicated: every rank holds all of it and computes the
same embeddings.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.layers import RMSNorm
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethodBase, UnquantizedLinearMethod
from autoglm.models.qwen2_5_vl_vision_config import Qwen2_5VLVisionConfig
from autoglm.models.rotary import RotaryAngles
from autoglm.models.vision_blocks import PatchEmbedding, VisionBlock
from autoglm.models.vision_layout import PatchLayout, vision_rotary_angles
from autoglm.models.vision_weights import vision_tower_weights
from autoglm.models.weight_loading import load_checkpoint_weights

_MERGER_NORM_EPS = 1e-6


@dataclass(frozen=True)
class AttentionWindows:
    """The merge units of a batch regrouped window by window: each frame's windows in row-major
    order, each window's units in row-major order; windows at the right and bottom edges are cut short."""

    unit_order: torch.Tensor  # [num_units] long: the original index of the unit at each regrouped place
    window_lengths: list[int]  # patches per window, in the regrouped order

    @classmethod
    def from_grid(cls, grid_thw: torch.Tensor, merge_size: int, window_units: int,
                  device: torch.device) -> AttentionWindows:
        """The windows of ``grid_thw``, already checked by :meth:`PatchLayout.from_grid`."""
        orders, lengths, offset = [], [], 0
        for frames, height, width in grid_thw.tolist():
            unit_rows, unit_columns = height // merge_size, width // merge_size
            windows_across = -(-unit_columns // window_units)
            windows_per_frame = -(-unit_rows // window_units) * windows_across
            window_of_unit = ((torch.arange(unit_rows) // window_units)[:, None] * windows_across
                              + (torch.arange(unit_columns) // window_units)[None, :]).flatten()
            window_of_unit = (torch.arange(frames)[:, None] * windows_per_frame + window_of_unit).flatten()
            orders.append(torch.argsort(window_of_unit, stable=True) + offset)
            lengths.extend((torch.bincount(window_of_unit) * merge_size ** 2).tolist())
            offset += window_of_unit.numel()
        return cls(torch.cat(orders).to(device), lengths)

    def patch_order(self, merge_size: int) -> torch.Tensor:
        """The original index of the patch at each regrouped place: each unit's patches stay together."""
        unit_patches = merge_size ** 2
        return (self.unit_order[:, None] * unit_patches + torch.arange(unit_patches, device=self.unit_order.device)
                ).flatten()


class Qwen2_5VLPatchMerger(nn.Module):
    """RMSNorm of each patch, then a GELU MLP over each merge unit's patches side by side."""

    def __init__(self, config: Qwen2_5VLVisionConfig, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.unit_features = config.hidden_size * config.spatial_merge_size ** 2
        self.ln_q = RMSNorm(config.hidden_size, _MERGER_NORM_EPS)
        self.mlp = nn.Sequential(Linear(self.unit_features, self.unit_features, True, linear_method), nn.GELU(),
                                 Linear(self.unit_features, config.out_hidden_size, True, linear_method))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ln_q(x).view(-1, self.unit_features))


class Qwen2_5VLVisionModel(nn.Module):
    """Patch embedding, the blocks (windowed or full attention), then the merger into the decoder's
    space. Parameter names are the checkpoint's, less its prefix."""

    def __init__(self, config: Qwen2_5VLVisionConfig, linear_method: LinearMethodBase | None = None) -> None:
        super().__init__()
        self.config = config
        linear_method = linear_method or UnquantizedLinearMethod()
        self.patch_embed = PatchEmbedding(config, False, linear_method)
        self.blocks = nn.ModuleList(VisionBlock(config.block_settings, linear_method) for _ in range(config.depth))
        self.merger = Qwen2_5VLPatchMerger(config, linear_method)

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """``[num_patches / m^2, out_hidden_size]`` for the images ``grid_thw`` describes."""
        config = self.config
        merge = config.spatial_merge_size
        layout = PatchLayout.from_grid(grid_thw, merge, pixel_values.device)
        layout.check_pixel_values(pixel_values, config.patch_features)
        windows = AttentionWindows.from_grid(grid_thw, merge, config.window_units, pixel_values.device)
        patch_order = windows.patch_order(merge)
        hidden = self.patch_embed(pixel_values.to(self.merger.ln_q.weight.dtype))[patch_order]
        angles = vision_rotary_angles(layout, config.head_dim, config.rope_theta)
        angles = RotaryAngles(cos=angles.cos[patch_order], sin=angles.sin[patch_order], interleaved=False)
        # Regrouping keeps every frame whole and in place, so the frames' lengths still hold.
        for index, block in enumerate(self.blocks):
            full = index in config.fullatt_block_indexes
            hidden = block(hidden, angles, layout.frame_lengths if full else windows.window_lengths)
        return self.merger(hidden)[torch.argsort(windows.unit_order)]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Fill every parameter from a full checkpoint's tensors; those outside the vision tower are skipped."""
        load_checkpoint_weights(self, vision_tower_weights(weights, self.config))
