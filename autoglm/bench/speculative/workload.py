"""The quoting workload: the model is shown a passage of its own training text, then its first words
again, and continues; a model that learned to copy its context quotes the rest."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.corpus import read_corpus


@dataclass(frozen=True)
class QuotingPrompt:
    token_ids: list[int]  # the passage, then its first ``cue`` tokens again


def quoting_prompts(tokenizer, count: int, passage_tokens: int, cue_tokens: int) -> list[QuotingPrompt]:
    """``count`` passages from evenly spaced places in the corpus's training split."""
    text = read_corpus().train
    spacing = len(text) // count
    prompts = []
    for index in range(count):
        passage = tokenizer.encode(text[index * spacing : (index + 1) * spacing], add_special_tokens=False)
        passage = passage[1 : passage_tokens + 1]  # the first token may be a word cut in two
        prompts.append(QuotingPrompt(passage + passage[:cue_tokens]))
    return prompts
