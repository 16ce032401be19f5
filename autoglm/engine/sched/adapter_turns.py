"""Which LoRA adapters' sequences a step may take: at most ``max_loras`` distinct ones (the model's slots).

When more adapters have work, those that had their turn least recently go first, so every adapter gets its turn
within a few steps and none waits for good; sequences of the base model are never held back. A turn given to
adapters whose requests cannot be admitted (no blocks, no sequence slots) falls back to the running sequences'
adapters, so a step is never left empty while some sequence could run.
"""
from __future__ import annotations

from collections.abc import Iterable

from autoglm.engine.sequence import Sequence


class AdapterTurns:
    def __init__(self, max_loras: int) -> None:
        self.max_loras = max_loras
        self._last_step: dict[int, int] = {}  # lora_int_id -> the latest step that ran it

    def allowed(self, candidates: Iterable[Sequence]) -> set[int] | None:
        """The adapter ids a step may run among ``candidates``' adapters; None when all of them may."""
        ids = {seq.lora_int_id for seq in candidates} - {None}
        if len(ids) <= self.max_loras:
            return None
        return set(sorted(ids, key=lambda lora_id: (self._last_step.get(lora_id, -1), lora_id))[:self.max_loras])

    def ran(self, seqs: Iterable[Sequence], allowed: set[int] | None, step: int) -> None:
        """The step ran ``seqs``; the adapters ``allowed`` had their turn, whether or not they could use it, so
        that one whose requests cannot be admitted yet does not keep the turn from the others."""
        for lora_id in allowed or ():
            self._last_step[lora_id] = step
        for seq in seqs:
            if seq.lora_int_id is not None:
                self._last_step[seq.lora_int_id] = step

    def forget(self, lora_int_id: int) -> None:
        """An unloaded adapter's turn is no one's concern any more."""
        self._last_step.pop(lora_int_id, None)
