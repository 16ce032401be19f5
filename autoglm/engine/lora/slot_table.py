"""Which adapter each of the model's ``max_loras`` slots holds, as the engine plans steps.

A step's adapters keep the slots they hold; the others take free slots or those of the adapters that ran
least recently, and travel with the step's plan to be installed before its forward. The scheduler gives a step
at most ``max_loras`` distinct adapters, so every one finds a slot.
"""
from __future__ import annotations

from autoglm.lora_adapter import LoRAAdapter
from autoglm.models.lora import NO_SLOT
from autoglm.step_plan import AdapterLoad


class SlotTable:
    def __init__(self, max_loras: int) -> None:
        self.held: list[LoRAAdapter | None] = [None] * max_loras
        self.last_used: list[int] = [-1] * max_loras
        self.num_steps = 0

    def forget_all(self) -> None:
        """A failed step may have left any slot half installed: every adapter is installed again when next run."""
        self.held = [None] * len(self.held)

    def assign(self, adapters: list[LoRAAdapter | None]) -> tuple[list[int], list[AdapterLoad]]:
        """Each row's slot (NO_SLOT for a row of the base model) for rows running ``adapters``, and the installs
        the step needs first. Raises ValueError past ``max_loras`` distinct adapters (a scheduler bug)."""
        self.num_steps += 1
        wanted = list({id(adapter): adapter for adapter in adapters if adapter is not None}.values())
        if len(wanted) > len(self.held):
            raise ValueError(f"a step has {len(wanted)} distinct LoRA adapters but there are {len(self.held)} slots "
                             "(max_loras)")
        slot_of = {id(adapter): slot for slot, adapter in enumerate(self.held)
                   if adapter is not None and any(adapter is other for other in wanted)}
        loads: list[AdapterLoad] = []
        for adapter in wanted:
            if id(adapter) in slot_of:
                continue
            taken = set(slot_of.values())
            slot = min((slot for slot in range(len(self.held)) if slot not in taken),
                       key=lambda slot: (self.held[slot] is not None, self.last_used[slot]))
            self.held[slot] = adapter
            slot_of[id(adapter)] = slot
            loads.append(AdapterLoad(slot, adapter.request, adapter))
        for slot in slot_of.values():
            self.last_used[slot] = self.num_steps
        return [NO_SLOT if adapter is None else slot_of[id(adapter)] for adapter in adapters], loads
