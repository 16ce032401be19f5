"""Random PEFT LoRA adapters of the tiny test models, made with peft as a user's training run would save them."""
from __future__ import annotations

from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

ATTENTION_AND_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Spread of lora_B, which PEFT starts at zero: large enough that an adapter changes the greedy tokens.
LORA_B_STD = 0.3


def make_adapter(base: Path, folder: Path, seed: int, rank: int = 4) -> Path:
    """A rank-`rank` adapter of `base` on every projection, lora_A and lora_B drawn from `seed`; its folder."""
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    torch.manual_seed(seed)
    adapted = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(ATTENTION_AND_MLP)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * LORA_B_STD)
    adapted.save_pretrained(folder)
    return folder
