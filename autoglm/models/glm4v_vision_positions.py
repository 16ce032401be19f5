"""The learned position embeddings of the GLM-4.1V vision tower, resampled bicubically from their
square grid to each image's own grid."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.layers import Embedding
from autoglm.models.vision_layout import PatchLayout


class VisionPositionEmbedding(nn.Module):
    """Learned embeddings on a square grid of ``side x side`` patches, sampled at each patch's place
    in its own image (bicubic, in float32, edges clamped) and added to it."""

    def __init__(self, side: int, hidden_size: int) -> None:
        super().__init__()
        self.side = side
        self.position_embedding = Embedding(side * side, hidden_size)  # a table, never indexed by id

    def forward(self, embeddings: torch.Tensor, layout: PatchLayout) -> torch.Tensor:
        table = self.position_embedding.weight
        grid = table.float().view(self.side, self.side, -1).permute(2, 0, 1)[None]
        # Patch centres in [-1, 1], x (column) first, as grid_sample reads them.
        x = (layout.columns + 0.5) / layout.grid_widths * 2 - 1
        y = (layout.rows + 0.5) / layout.grid_heights * 2 - 1
        where = torch.stack((x, y), dim=-1)[None, :, None, :]
        sampled = F.grid_sample(grid, where, mode="bicubic", align_corners=False, padding_mode="border")
        return embeddings + sampled[0, :, :, 0].t().to(table.dtype)
