"""Which token rows of a step run with which adapter slot, grouped so each slot's rows take one batched product."""
from __future__ import annotations

from dataclasses import dataclass

import torch

NO_SLOT = -1  # a row of the base model alone


@dataclass(frozen=True)
class SlotRows:
    """Adapter ``slot``'s rows: ``start..end - 1`` of the step's adapter rows once ordered by slot."""

    slot: int
    start: int
    end: int


class LoRAStepRows:
    """The current step's token rows with adapters, ordered by slot (``rows``; None when that order is every row
    in batch order, so no gather is needed), and each slot's run of them (``groups``). Read by every wrapped
    projection: one gather and one scatter per projection, however many adapters the step holds."""

    def __init__(self) -> None:
        self.groups: list[SlotRows] = []
        self.rows: torch.Tensor | None = None

    @property
    def has_adapters(self) -> bool:
        return bool(self.groups)

    def set(self, token_slots: list[int], device: torch.device) -> None:
        """Group the step's token rows by ``token_slots`` (one per token, NO_SLOT for the base model)."""
        order = sorted((slot, row) for row, slot in enumerate(token_slots) if slot != NO_SLOT)
        rows = [row for _, row in order]
        self.rows = None if rows == list(range(len(token_slots))) else torch.tensor(rows, device=device)
        self.groups = []
        for index, (slot, _) in enumerate(order):
            if self.groups and self.groups[-1].slot == slot:
                self.groups[-1] = SlotRows(slot, self.groups[-1].start, index + 1)
            else:
                self.groups.append(SlotRows(slot, index, index + 1))
