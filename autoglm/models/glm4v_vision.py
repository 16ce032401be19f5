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

from autoglm.models.glm4v_vision_blocks import PatchMerger, VisionBlock
from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.glm4v_vision_positions import PatchLayout, VisionPositionEmbedding, vision_rotary_angles
from autoglm.models.layers import RMSNorm
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethodBase, UnquantizedLinearMethod
from autoglm.models.weight_loading import load_checkpoint_weights

# Where the vision tower's tensors live in a full checkpoint: transformers 5 (and 4.5x) write the
# first, earlier GLM-4.1V checkpoints the second.
VISION_PREFIXES = ("model.visual.", "visual.")
_PATCH_EMBED_WEIGHT = "patch_embed.proj.weight"
_DOWNSAMPLE_WEIGHT = "downsample.weight"


class PatchEmbedding(nn.Module):
    """The Conv3d over each patch, as the linear it is: ``proj`` ``[hidden, C * T * P * P]``."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase) -> None:
        super().__init__()
        self.proj = Linear(config.patch_features, config.hidden_size, True, linear_method)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values)


class Glm4vVisionModel(nn.Module):
    """Patch embedding, position embeddings, the blocks, then the downsample of each merge window
    and the merger into the decoder's space. Parameter names are the checkpoint's, less its prefix."""

    def __init__(self, config: Glm4vVisionConfig, linear_method: LinearMethodBase | None = None) -> None:
        super().__init__()
        self.config = config
        linear_method = linear_method or UnquantizedLinearMethod()
        window = config.spatial_merge_size ** 2
        self.patch_embed = PatchEmbedding(config, linear_method)
        self.post_conv_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.embeddings = VisionPositionEmbedding(config.positions_per_side, config.hidden_size)
        self.blocks = nn.ModuleList(VisionBlock(config, linear_method) for _ in range(config.depth))
        self.post_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.downsample = Linear(window * config.hidden_size, config.out_hidden_size, True, linear_method)
        self.merger = PatchMerger(config, linear_method)

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """``[num_patches / m^2, out_hidden_size]`` for the images ``grid_thw`` describes."""
        config = self.config
        layout = PatchLayout.from_grid(grid_thw, config.spatial_merge_size, pixel_values.device)
        if pixel_values.dim() != 2 or pixel_values.shape != (layout.num_patches, config.patch_features):
            raise ValueError(
                f"pixel_values must be [num_patches, channels x frames x patch x patch] = "
                f"[{layout.num_patches}, {config.patch_features}] for grid_thw {grid_thw.tolist()}, "
                f"got {tuple(pixel_values.shape)}"
            )
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
    """The vision tower's tensors of a full checkpoint under this encoder's names (the prefix
    dropped), the two convolution kernels flattened into the linears they are."""
    for name, tensor in weights:
        prefix = next((prefix for prefix in VISION_PREFIXES if name.startswith(prefix)), None)
        if prefix is None:
            continue
        name = name.removeprefix(prefix)
        if name == _PATCH_EMBED_WEIGHT:
            kernel = _checked_kernel(name, tensor, (config.in_channels, config.temporal_patch_size,
                                                    config.patch_size, config.patch_size))
            tensor = kernel.reshape(kernel.shape[0], -1)
        elif name == _DOWNSAMPLE_WEIGHT:
            # [out, hidden, m, m] read window-major: a window's patches in order, each patch's features.
            merge = config.spatial_merge_size
            kernel = _checked_kernel(name, tensor, (config.hidden_size, merge, merge))
            tensor = kernel.permute(0, 2, 3, 1).reshape(kernel.shape[0], -1)
        yield name, tensor


def _checked_kernel(name: str, kernel: torch.Tensor, expected: tuple[int, ...]) -> torch.Tensor:
    """``kernel`` itself, once its shape past the output channels is checked against ``expected``."""
    if kernel.dim() != len(expected) + 1 or tuple(kernel.shape[1:]) != expected:
        raise ValueError(f"checkpoint tensor '{name}' has shape {tuple(kernel.shape)}, but the encoder expects "
                         f"[out_channels, {', '.join(map(str, expected))}]")
    return kernel
