"""A step's encoded image rows and the tokens they stand for: what the runner hands a vision-language
model beside the token ids, so that each image placeholder's input embedding is the encoder's row."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ImageEmbeddings:
    """Rows of the vision encoder's output and where they go in the step's flattened batch."""

    token_indices: torch.Tensor  # [N] long: the step's tokens whose input embeddings are replaced
    rows: torch.Tensor  # [N, hidden]: in the same order

    def __post_init__(self) -> None:
        if self.token_indices.dim() != 1 or self.rows.dim() != 2 or self.rows.shape[0] != self.token_indices.shape[0]:
            raise ValueError(f"image embeddings need one row per token index, got {tuple(self.rows.shape)} rows "
                             f"for {tuple(self.token_indices.shape)} indices")
