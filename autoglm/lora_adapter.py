"""A LoRA adapter as read from its folder and checked against a base model: plain data that the engine keeps
loaded and that a step plan hands the runner to install."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.lora_request import LoRARequest


@dataclass(frozen=True, eq=False)
class LoRAAdapter:
    """An adapter's low-rank pairs, checked against the model: module name -> (A [rank, in], B [out, rank]),
    and what every product is scaled by. Compared by identity: each load is one object. ``digest`` is its weights file's content hash: what the prefix cache
    keys its blocks by, so two names of the same file share blocks and two files never do."""

    request: LoRARequest
    rank: int
    scale: float
    weights: dict[str, tuple[torch.Tensor, torch.Tensor]]
    digest: bytes

    @property
    def name(self) -> str:
        return self.request.lora_name

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.weights.values())
