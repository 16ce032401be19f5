"""Score a text with the engine's own prompt logprobs: loss per token and per character."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from tqdm.auto import tqdm

from autoglm.engine.tokenize import encode_text
from autoglm.llm import LLM
from autoglm.sampling_params import SamplingParams

# "scoring perplexity: 100%|███| 302/302 passages [00:10<00:00]": what is done, counted in what the user gave.
PROGRESS_BAR = "scoring perplexity: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} passages [{elapsed}<{remaining}]"


@dataclass
class PerplexityResult:
    num_characters: int
    num_tokens: int
    num_scored_tokens: int  # every token but the very first has a prediction
    total_nll: float  # summed negative log-likelihood, in nats

    @property
    def loss_per_token(self) -> float:
        return self.total_nll / self.num_scored_tokens

    @property
    def perplexity(self) -> float:
        """e to the loss per token: the number of equally likely tokens the model is as unsure as."""
        return math.exp(self.loss_per_token)

    @property
    def loss_per_character(self) -> float:
        """Per-token loss times tokens per character: the total spread over the text's characters."""
        return self.loss_per_token * self.num_tokens / self.num_characters


def score_windows(token_ids: list[int], window: int) -> list[tuple[int, int]]:
    """(start, first scored position) of overlapping windows: each token is scored once, with at
    least half a window of context except near the start."""
    stride = max(window // 2, 1)
    windows, scored_from = [], 1
    start = 0
    while scored_from < len(token_ids):
        windows.append((start, scored_from))
        scored_from = start + window
        start = max(scored_from - window + stride, 0)
    return windows


def evaluate_perplexity(llm: LLM, text: str, window: int | None = None, use_tqdm: bool = False) -> PerplexityResult:
    """Negative log-likelihood of ``text`` under the model, scored in context windows.

    `use_tqdm` shows a bar of passages (context windows) scored: a long text takes minutes.
    """
    token_ids = encode_text(llm.get_tokenizer(), text)
    if len(token_ids) < 2:
        raise ValueError("the text must hold at least two tokens to be scored")
    window = min(window or llm.engine.max_context_len - 1, llm.engine.max_context_len - 1)
    spans = score_windows(token_ids, window)
    prompts = [token_ids[start : start + window] for start, _ in spans]
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
    bar = partial(tqdm, bar_format=PROGRESS_BAR) if use_tqdm else False
    outputs = llm.generate(prompts, params, use_tqdm=bar)
    total, scored = 0.0, 0
    for (start, scored_from), output in zip(spans, outputs):
        for offset, position in enumerate(output.prompt_logprobs):
            absolute = start + offset
            if position is None or absolute < scored_from:
                continue
            total -= position[token_ids[absolute]].logprob
            scored += 1
    return PerplexityResult(len(text), len(token_ids), scored, total)
