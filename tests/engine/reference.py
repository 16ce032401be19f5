"""Reference continuations from the transformers implementation of the same weights."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from transformers import AutoModelForCausalLM


@dataclass
class Reference:
    token_ids: list[list[int]]  # greedy continuation per prompt
    logprobs: list[list[float]]  # raw-model log-prob of each chosen token
    margins: list[list[float]] = field(default_factory=list)  # how far each chosen token's log-prob led the next


def greedy_reference(model_dir, prompts: list[list[int]], max_new_tokens: int,
                     dtype: torch.dtype = torch.float32) -> Reference:
    """transformers ``generate`` one prompt at a time (no padding), never stopping early."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    model.generation_config.eos_token_id = None
    tokens, logprobs, margins = [], [], []
    with torch.inference_mode():
        for prompt in prompts:
            out = model.generate(
                torch.tensor([prompt]), do_sample=False, max_new_tokens=max_new_tokens,
                min_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True,
                pad_token_id=0,
            )
            new = out.sequences[0, len(prompt):].tolist()
            steps = [torch.log_softmax(step[0].float(), -1) for step in out.logits]
            top_two = [step.topk(2).values for step in steps]
            tokens.append(new)
            logprobs.append([step[t].item() for step, t in zip(steps, new)])
            margins.append([(first - second).item() for first, second in top_two])
    return Reference(tokens, logprobs, margins)


PARITY_PROMPT_LENGTHS = (3, 9, 16, 17, 25, 33, 40, 48)


def parity_prompts() -> list[list[int]]:
    """Eight prompts of the lengths above, every second one starting with the same 20 tokens (prefix hits)."""
    rng = random.Random(1)
    shared = [rng.randrange(3, 200) for _ in range(20)]
    return [
        (shared if i % 2 else [])[:length] + [rng.randrange(3, 200) for _ in range(length - min(length, 20) * (i % 2))]
        for i, length in enumerate(PARITY_PROMPT_LENGTHS)
    ]
