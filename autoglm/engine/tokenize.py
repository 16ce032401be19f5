"""Turning text into token ids for the engine, whatever its length."""
from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from autoglm.errors import InvalidRequestError


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str, add_special_tokens: bool = True) -> list[int]:
    """Token ids of `text`, without transformers' "longer than the maximum sequence length" warning.

    Long texts are expected here: the engine refuses a prompt past its own context limit with a
    clear error, and perplexity scoring windows a long text on purpose, so the tokenizer's
    model_max_length (often smaller than the engine's limit, or unset) would only mislead.
    """
    return tokenizer.encode(text, add_special_tokens=add_special_tokens, verbose=False)


def check_token_ids(token_ids: list[int], vocab_size: int, field: str) -> None:
    """Refuse ids outside the vocabulary, naming `field`, before the model or the tokenizer meets
    them: the tokenizer cannot even convert a negative or huge id, and would fail as a server bug."""
    for token_id in token_ids:
        if not 0 <= token_id < vocab_size:
            raise InvalidRequestError(
                f"{field}: token id {token_id} is out of range; token ids must be in [0, {vocab_size})", param=field,
            )
