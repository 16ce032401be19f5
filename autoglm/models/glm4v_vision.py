"""The vision encoder of GLM-4.1V (``Glm4vForConditionalGeneration``): image patches in, one
embedding in the decoder's hidden size out per ``m x m`` window of patches.

It takes what the transformers image processor returns: ``pixel_values`` ``[num_patches,
C * T * P * P]`` and ``grid_thw`` ``[num_images, 3]``, several images of any sizes in one call,
and returns ``[num_patches / m^2, out_hidden_size]`` in the same order, image after image.
The checkpoint's two convolutions have kernel == stride, so each is a linear over flattened
patches (the patch embedding) or over flattened merge windows (the downsample); their weights
are reshaped as they load. Every projection multiplies through the one linear method the encoder
is built with, so a quantized method applies to all of them.

Under tensor parallelism the encoder is replicated: every rank holds all of it and computes the
same embeddings.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch import nn

from autoglm.models.glm4v_vision_blocks import PatchMerger
from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.glm4v_vision_positions import VisionPositionEmbedding
from autoglm.models.layers import RMSNorm
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethodBase, UnquantizedLinearMethod
from autoglm.models.vision_blocks import PatchEmbedding, VisionBlock
from autoglm.models.vision_layout import PatchLayout, vision_rotary_angles
from autoglm.models.vision_weights import checked_kernel, vision_tower_weights
from autoglm.models.weight_loading import load_checkpoint_weights

_DOWNSAMPLE_WEIGHT = "downsample.weight"


class Glm4vVisionModel(nn.Module):
    """Patch embedding, position embeddings, the blocks, then the downsample of each merge window
    and the merger into the decoder's space. Parameter names are the checkpoint's, less its prefix."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase | None = None) -> None:
        super().__init__()
        self.config = config
        linear_method = linear_method or UnquantizedLinearMethod()
        window = config.spatial_merge_size ** 2
        self.patch_embed = PatchEmbedding(config, True, linear_method)
        self.post_conv_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.embeddings = VisionPositionEmbedding(config.positions_per_side, config.hidden_size)
        self.blocks = nn.ModuleList(VisionBlock(config.block_settings, linear_method) for _ in range(config.depth))
        self.post_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.downsample = Linear(window * config.hidden_size, config.out_hidden_size, True, linear_method)
        self.merger = PatchMerger(config, linear_method)

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """``[num_patches / m^2, out_hidden_size]`` for the images ``grid_thw`` describes."""
        config = self.config
        layout = PatchLayout.from_grid(grid_thw, config.spatial_merge_size, pixel_values.device)
        layout.check_pixel_values(pixel_values, config.patch_features)
        dtype = self.post_layernorm.weight.dtype
        hidden = self.post_conv_layernorm(self.patch_embed(pixel_values.to(dtype)))
        hidden = self.embeddings(hidden, layout)
        angles = vision_rotary_angles(layout, config.head_dim, config.rope_theta)
        for block in self.blocks:
            hidden = block(hidden, angles, layout.frame_lengths)
        hidden = self.post_layernorm(hidden)
        windows = hidden.view(-1, config.spatial_merge_size ** 2 * config.hidden_size)
        return self.merger(self.downsample(windows))

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Fill every parameter from a full checkpoint's tensors; those outside the vision tower are skipped."""
        load_checkpoint_weights(self, vision_checkpoint_weights(weights, self.config))


def vision_checkpoint_weights(weights: Iterable[tuple[str, torch.Tensor]],
                              config: Glm4vVisionConfig) -> Iterator[tuple[str, torch.Tensor]]:
    """The vision tower's tensors of a full checkpoint under this encoder's names, both
    convolution kernels flattened into the linears they are."""
    for name, tensor in vision_tower_weights(weights, config):
        if name == _DOWNSAMPLE_WEIGHT:
            # [out, hidden, m, m] read window-major: a window's patches in order, each patch's features.
            merge = config.spatial_merge_size
            kernel = checked_kernel(name, tensor, (config.hidden_size, merge, merge))
            tensor = kernel.permute(0, 2, 3, 1).reshape(kernel.shape[0], -1)
        yield name, tensor
