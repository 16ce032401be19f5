"""Which rows of a step run with which adapter slot, grouped so each slot's rows take one batched product."""
from __future__ import annotations

from dataclasses import dataclass

import torch

NO_SLOT = -1  # a row of the base model alone


@dataclass(frozen=True)
class SlotRows:
    """The token rows of the flattened batch that run with adapter ``slot``; ``rows`` None: every row."""

    slot: int
    rows: torch.Tensor | None


class LoRAStepRows:
    """The current step's grouping of token rows by adapter slot, read by every LoRA-wrapped projection."""

    def __init__(self) -> None:
        self.groups: list[SlotRows] = []

    @property
    def has_adapters(self) -> bool:
        return bool(self.groups)

    def set(self, token_slots: list[int], device: torch.device) -> None:
        """Group the step's token rows by ``token_slots`` (one per token, NO_SLOT for the base model)."""
        slots = sorted(set(token_slots) - {NO_SLOT})
        if len(slots) == 1 and NO_SLOT not in token_slots:
            self.groups = [SlotRows(slots[0], None)]
            return
        if not slots:
            self.groups = []
            return
        slot_of_row = torch.tensor(token_slots, dtype=torch.long)
        self.groups = [SlotRows(slot, torch.nonzero(slot_of_row == slot).flatten().to(device)) for slot in slots]

    def clear(self) -> None:
        self.groups = []
