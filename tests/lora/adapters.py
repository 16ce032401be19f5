"""A tiny random Qwen2 base and random PEFT LoRA adapters of it, and the greedy continuations transformers + PEFT
give with each adapter: the reference every LoRA test compares against."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

from autoglm.lora_request import LoRARequest
from tests.engine.reference import Reference
from tests.tiny_models import build_tiny_model, make_tiny_checkpoint

BASE_ARCH = "qwen2"
B_STD = 0.3  # spread of the random lora_B (PEFT starts it at zero, which would change nothing)


@dataclass(frozen=True)
class AdapterSpec:
    """What a test adapter is made of: PEFT's LoraConfig settings."""

    rank: int
    alpha: float
    targets: tuple[str, ...]
    use_rslora: bool = False


# Different ranks and targets, one rsLoRA: between them every projection an adapter may change.
ADAPTER_SPECS = {
    "attention": AdapterSpec(8, 16, ("q_proj", "k_proj", "v_proj", "o_proj")),
    "mlp": AdapterSpec(4, 8, ("gate_proj", "up_proj", "down_proj")),
    "everything": AdapterSpec(16, 32, ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                              use_rslora=True),
}


def make_base(path: Path, **overrides) -> Path:
    return make_tiny_checkpoint(BASE_ARCH, path, **overrides)


def make_adapter(base_dir: Path, path: Path, spec: AdapterSpec, seed: int) -> Path:
    """A PEFT adapter of ``base_dir`` with random A and B, saved as adapter_config.json + safetensors."""
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(r=spec.rank, lora_alpha=spec.alpha, target_modules=list(spec.targets),
                        use_rslora=spec.use_rslora, lora_dropout=0.0)
    peft_model = get_peft_model(model, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(B_STD * torch.randn(parameter.shape, generator=generator))
    peft_model.save_pretrained(path)
    return path


def make_adapter_for_other_base(path: Path, spec: AdapterSpec, **overrides) -> Path:
    """An adapter of a base of other sizes (``overrides`` of the tiny config), which the test base must refuse."""
    model = build_tiny_model(BASE_ARCH, **overrides)
    peft_model = get_peft_model(model, LoraConfig(r=spec.rank, lora_alpha=spec.alpha,
                                                  target_modules=list(spec.targets)))
    peft_model.save_pretrained(path)
    return path


def edit_adapter_config(path: Path, **changes) -> None:
    config_path = path / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config.update(changes)
    config_path.write_text(json.dumps(config))


def peft_reference(base_dir: Path, adapter_dir: Path | None, prompts: list[list[int]], max_new_tokens: int,
                   quantize=None) -> Reference:
    """Greedy continuations and their log-probs from transformers with the adapter through PEFT (the base alone
    for None), in float32; ``quantize`` turns each base projection weight into what int8 storage gives back."""
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    if quantize is not None:
        with torch.no_grad():
            for name, module in model.named_modules():
                if isinstance(module, torch.nn.Linear) and ".layers." in name:
                    module.weight.copy_(quantize(module.weight))
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    tokens, logprobs = [], []
    with torch.inference_mode():
        for prompt in prompts:
            ids = list(prompt)
            chosen, scores = [], []
            for _ in range(max_new_tokens):
                logits = model(torch.tensor([ids])).logits[0, -1].float()
                step = torch.log_softmax(logits, -1)
                token = int(step.argmax())
                chosen.append(token)
                scores.append(step[token].item())
                ids.append(token)
            tokens.append(chosen)
            logprobs.append(scores)
    return Reference(tokens, logprobs)


def lora_request(name: str, path: Path, lora_int_id: int) -> LoRARequest:
    return LoRARequest(name, lora_int_id, str(path))
