"""LoRA adapters applied on the fly to a loaded base model: read and checked (``adapter``), held in slot tables
(``slots``) and added to each wrapped projection's output for the rows that name them (``method``)."""
from __future__ import annotations

import torch
from torch import nn

from autoglm.models.lora.adapter import LoRAAdapter, read_adapter
from autoglm.models.lora.slots import LoRASlots
from autoglm.models.lora.step_rows import NO_SLOT, LoRAStepRows, SlotRows


def enable_lora(model: nn.Module, max_loras: int, max_rank: int, dtype: torch.dtype,
                device: torch.device) -> LoRASlots:
    """Give ``model``'s projections ``max_loras`` adapter slots of rank ``max_rank``, kept as ``model.lora``; the
    model then runs a step with adapter rows layer by layer (its native decode step knows no adapters)."""
    table_dtype = torch.float32 if device.type == "cpu" else dtype  # see models.lora.method
    model.lora = LoRASlots(model, max_loras, max_rank, table_dtype, device)
    return model.lora


__all__ = ["NO_SLOT", "LoRAAdapter", "LoRASlots", "LoRAStepRows", "SlotRows", "enable_lora", "read_adapter"]
