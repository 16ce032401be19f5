"""The accuracy a compact KV cache costs: perplexity of held-out text, and how its next-token
distributions differ from those of the compute-dtype cache (``auto``) at the same positions.
With int8/int4 weights (the ``quantization`` setting) each cache is measured with them, still against
the float weights with the ``auto`` cache: what the two together cost.

Trained weights are needed for these numbers to mean anything: on random weights the
distributions are noise. The default model, trained on the corpus whose held-out part is scored
here, is what the command measures unless told otherwise.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from autoglm.attention.kv_cache_format import AUTO
from autoglm.bench.kv_accuracy.report import FLOAT_WEIGHTS
from autoglm.config import AutoGLMConfig
from autoglm.engine.tokenize import encode_text
from autoglm.llm import LLM
from autoglm.perplexity import evaluate_perplexity
from autoglm.sampling_params import SamplingParams


@dataclass(frozen=True)
class KVCacheAccuracy:
    kv_cache_dtype: str
    compute_dtype: str
    kv_cache_bytes_per_token: float  # every layer's K and V, scales included
    loss_per_token: float  # nats, over the whole held-out text
    loss_per_character: float
    top1_agreement: float  # share of positions whose most likely next token is auto's
    mean_kl_divergence: float  # KL(auto || this), nats, averaged over the positions
    quantization: str = FLOAT_WEIGHTS  # the weights it ran with

    @property
    def label(self) -> str:
        """The kv_cache_dtype, preceded by the weights where they are quantized: ``int8 weights, int8``."""
        if self.quantization == FLOAT_WEIGHTS:
            return self.kv_cache_dtype
        return f"{self.quantization} weights, {self.kv_cache_dtype}"


def window_starts(num_tokens: int, window: int, num_positions: int) -> list[int]:
    """Starts of the fewest ``window``-token windows that hold ``num_positions`` predictions
    (``window - 1`` each), spread evenly over the text."""
    count = -(-num_positions // (window - 1))
    if count * window > num_tokens:
        raise ValueError(f"{num_positions} positions need {count} windows of {window} tokens; the text has "
                         f"only {num_tokens} tokens")
    stride = (num_tokens - window) // max(count - 1, 1)
    return [index * stride for index in range(count)]


def next_token_logprobs(llm: LLM, windows: list[list[int]], num_positions: int) -> torch.Tensor:
    """Log-probabilities ``[num_positions, vocab]`` of every next token after each window's prefixes,
    read from the LM head while the engine scores each window as a prompt."""
    captured: list[torch.Tensor] = []
    hook = llm.engine.runner.model.lm_head.register_forward_hook(
        lambda module, inputs, output: captured.append(output.float().cpu()))
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
    rows = []
    try:
        for window in windows:
            captured.clear()
            llm.generate([window], params, use_tqdm=False)
            logits = torch.cat(captured)
            if logits.shape[0] != len(window):  # each prompt position once, then the sampled one
                raise RuntimeError(f"expected {len(window)} rows of logits per window, got {logits.shape[0]}")
            rows.append(torch.log_softmax(logits[:-1], dim=-1))
    finally:
        hook.remove()
    return torch.cat(rows)[:num_positions]


def measure_kv_accuracy(config: AutoGLMConfig, kv_cache_dtypes: list[str], text: str,
                        num_positions: int) -> list[KVCacheAccuracy]:
    """One engine per kv_cache_dtype with ``config``'s weights, after the float weights with the ``auto``
    cache: what the others are compared with (measured once where it is one of them)."""
    reference_config = config.model_copy(update={"kv_cache_dtype": AUTO.name, "quantization": FLOAT_WEIGHTS})
    configs = [reference_config, *(config.model_copy(update={"kv_cache_dtype": name}) for name in kv_cache_dtypes)]
    configs = [run for index, run in enumerate(configs) if run not in configs[:index]]
    reference: torch.Tensor | None = None
    results = []
    for run_config in configs:
        llm = LLM.from_config(run_config)
        token_ids = encode_text(llm.get_tokenizer(), text)
        window = llm.engine.max_context_len - 1
        windows = [token_ids[start: start + window]
                   for start in window_starts(len(token_ids), window, num_positions)]
        logprobs = next_token_logprobs(llm, windows, num_positions)
        reference = logprobs if reference is None else reference
        perplexity = evaluate_perplexity(llm, text)
        results.append(KVCacheAccuracy(
            kv_cache_dtype=run_config.kv_cache_dtype,
            compute_dtype=str(llm.engine.dtype).removeprefix("torch."),
            kv_cache_bytes_per_token=llm.engine.kv_bytes_per_token,
            loss_per_token=perplexity.loss_per_token,
            loss_per_character=perplexity.loss_per_character,
            top1_agreement=(logprobs.argmax(-1) == reference.argmax(-1)).float().mean().item(),
            mean_kl_divergence=(reference.exp() * (reference - logprobs)).sum(-1).mean().item(),
            quantization=run_config.quantization,
        ))
    return results


def results_document(config: AutoGLMConfig, results: list[KVCacheAccuracy], num_positions: int,
                     num_characters: int, machine: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": machine,
        "engine": config.model_dump(),
        "num_positions": num_positions,
        "num_characters": num_characters,
        "kv_cache_dtypes": {result.label: asdict(result) for result in results},
    }
