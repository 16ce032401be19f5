"""Prompts for ``autoglm bench serve``: random ones, ones sharing a long prefix, or a JSONL file.

Prompts go out as text, not token ids, so that any OpenAI-compatible server takes them. Random
ids rarely decode to text that reads back as the same number of tokens, so random text is
adjusted until the tokenizer counts exactly the asked length.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.workloads import usable_token_ids

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DATASETS = ("random", "shared-prefix", "jsonl")
# Rounds of trimming or extending random text before settling for the nearest length found.
MAX_FIT_ROUNDS = 20


@dataclass(frozen=True)
class ServeRequest:
    """One prompt and how many tokens to ask for."""

    prompt: str
    prompt_len: int | None  # tokens as the benchmark's tokenizer counts them; None without a tokenizer
    output_len: int


def count_tokens(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    """The prompt's own tokens; a BOS the server adds is its business and shows in its usage."""
    return len(tokenizer.encode(text, add_special_tokens=False))


def prompt_token_pool(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids random prompts are drawn from: those that decode to text reading back as themselves.

    That leaves out special tokens (no prompt holds an EOS) and bytes of a character cut in
    half, whose replacement character reads back as several tokens.
    """
    candidates = usable_token_ids(len(tokenizer), tokenizer.all_special_ids)
    texts = tokenizer.batch_decode([[token_id] for token_id in candidates])
    read_back = tokenizer(texts, add_special_tokens=False)["input_ids"]
    pool = [token_id for token_id, ids in zip(candidates, read_back) if ids == [token_id]]
    if not pool:
        raise ServeBenchError("the tokenizer has no token that decodes and reads back as itself")
    return pool


def fit_text(tokenizer: PreTrainedTokenizerBase, target: int, pool: Sequence[int], rng: random.Random,
             prefix: str = "") -> tuple[str, int]:
    """``prefix`` plus random text that the tokenizer reads as ``target`` tokens, and the count reached.

    Token boundaries move when random ids are decoded and read back, so the tail is re-read in
    the tokenizer's own ids, then cut or extended by the difference, until the count is exact
    (almost always within a few rounds).
    """
    prefix_len = count_tokens(tokenizer, prefix)
    tail = rng.choices(pool, k=max(target - prefix_len, 0))
    for _ in range(MAX_FIT_ROUNDS):
        text = prefix + tokenizer.decode(tail)
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) == target:
            break
        tail = ids[prefix_len:target] + rng.choices(pool, k=max(target - len(ids), 0))
    return text, len(ids)


def length_range(length: int, range_ratio: float) -> tuple[int, int]:
    """Inclusive bounds ``length * (1 -+ range_ratio)``, never below one token."""
    return max(1, math.floor(length * (1 - range_ratio))), max(1, math.ceil(length * (1 + range_ratio)))


def random_requests(tokenizer: PreTrainedTokenizerBase, num_prompts: int, input_len: int, output_len: int,
                    range_ratio: float, rng: random.Random) -> list[ServeRequest]:
    """Prompts of random tokens, input and output lengths uniform within ``range_ratio`` of the given ones."""
    pool = prompt_token_pool(tokenizer)
    input_bounds, output_bounds = length_range(input_len, range_ratio), length_range(output_len, range_ratio)
    requests = []
    for _ in range(num_prompts):
        text, length = fit_text(tokenizer, rng.randint(*input_bounds), pool, rng)
        requests.append(ServeRequest(text, length, rng.randint(*output_bounds)))
    return requests


def shared_prefix_requests(tokenizer: PreTrainedTokenizerBase, num_prompts: int, prefix_len: int,
                           question_len: int, output_len: int, rng: random.Random,
                           num_prefixes: int = 1) -> list[ServeRequest]:
    """A random prefix of ``prefix_len`` tokens before every prompt's own random question, the shape
    of many users asking about one long document: it measures prefix caching. With several
    prefixes (documents), prompts take them in turn, which measures routing them to the replicas
    that cache them."""
    pool = prompt_token_pool(tokenizer)
    prefixes = [fit_text(tokenizer, prefix_len, pool, rng) for _ in range(num_prefixes)]
    requests = []
    for index in range(num_prompts):
        prefix, reached_prefix_len = prefixes[index % num_prefixes]
        text, length = fit_text(tokenizer, reached_prefix_len + question_len, pool, rng, prefix=prefix)
        requests.append(ServeRequest(text, length, output_len))
    return requests


def jsonl_requests(path: Path, num_prompts: int, output_len: int,
                   tokenizer: PreTrainedTokenizerBase | None) -> list[ServeRequest]:
    """The first ``num_prompts`` lines of ``path``, each ``{"prompt": str, "output_len": int (optional)}``.

    Blank lines are skipped; other keys are ignored. Without a tokenizer prompt lengths are left
    to the server's usage counts.
    """
    if not path.is_file():
        raise ServeBenchError(f"the dataset file {path} does not exist")
    requests = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if len(requests) == num_prompts:
                break
            if line.strip():
                prompt, length = _parse_line(line, f"{path}, line {number}", output_len)
                prompt_len = None if tokenizer is None else count_tokens(tokenizer, prompt)
                requests.append(ServeRequest(prompt, prompt_len, length))
    if not requests:
        raise ServeBenchError(f"the dataset file {path} holds no prompts")
    return requests


def _parse_line(line: str, where: str, default_output_len: int) -> tuple[str, int]:
    try:
        entry: Any = json.loads(line)
    except json.JSONDecodeError as error:
        raise ServeBenchError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(entry, dict):
        raise ServeBenchError(f"{where}: expected a JSON object with a \"prompt\", got {type(entry).__name__}")
    prompt = entry.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise ServeBenchError(f"{where}: \"prompt\" must be a non-empty string")
    output_len = entry.get("output_len", default_output_len)
    if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1:
        raise ServeBenchError(f"{where}: \"output_len\" must be a positive integer, got {output_len!r}")
    return prompt, output_len
