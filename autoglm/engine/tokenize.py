"""Turning text into token ids for the engine, whatever its length."""
from __future__ import annotations

from transformers import PreTrainedTokenizerBase


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str, add_special_tokens: bool = True) -> list[int]:
    """Token ids of `text`, without transformers' "longer than the maximum sequence length" warning.

    Long texts are expected here: the engine refuses a prompt past its own context limit with a
    clear error, and perplexity scoring windows a long text on purpose, so the tokenizer's
    model_max_length (often smaller than the engine's limit, or unset) would only mislead.
    """
    return tokenizer.encode(text, add_special_tokens=add_special_tokens, verbose=False)
