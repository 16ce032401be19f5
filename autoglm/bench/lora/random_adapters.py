"""Random PEFT LoRA adapters of a loaded model, written as ``adapter_config.json`` + safetensors: what the
benchmark serves (no training, no PEFT needed; only their cost is measured)."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from autoglm.models.lora.targets import ProjectionTarget

# Every projection, split where the engine fuses (gate_up_proj is the fused name GLM-4's checkpoints use).
ADAPTED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
STD = 0.02  # small enough that the adapted model still writes text


def write_random_adapter(folder: Path, targets: dict[str, ProjectionTarget], rank: int, seed: int) -> Path:
    """An adapter of ``rank`` on every ADAPTED projection of ``targets``, with seeded random A and B."""
    generator = torch.Generator().manual_seed(seed)
    modules = {name: target for name, target in targets.items() if name.rpartition(".")[2] in ADAPTED}
    tensors = {}
    for name, target in modules.items():
        tensors[f"base_model.model.{name}.lora_A.weight"] = STD * torch.randn(rank, target.in_features,
                                                                              generator=generator)
        tensors[f"base_model.model.{name}.lora_B.weight"] = STD * torch.randn(target.out_features, rank,
                                                                              generator=generator)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / "adapter_model.safetensors")
    settings = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "bias": "none",
                "target_modules": sorted({name.rpartition(".")[2] for name in modules})}
    (folder / "adapter_config.json").write_text(json.dumps(settings))
    return folder
