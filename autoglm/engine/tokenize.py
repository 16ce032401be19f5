"""Turning text into token ids for the engine, whatever its length, and refusing text no context could hold."""
from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from autoglm.engine.errors import ContextLengthExceededError
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.multimodal import MultiModalPrompt


@dataclass(frozen=True)
class TokenizedPrompt:
    """A prompt its sender has already tokenized (the server does, in its tokenizer workers), so the
    engine only checks the ids; `text` is what they came from, handed back in the request's outputs."""

    token_ids: list[int]
    text: str | None = None
    multi_modal: MultiModalPrompt | None = None  # the images whose placeholder tokens the ids hold


# Text, token ids, or token ids with the text they came from (the server tokenizes before it sends).
Prompt = str | list[int] | TokenizedPrompt


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str, add_special_tokens: bool = True) -> list[int]:
    """Token ids of `text`, without transformers' "longer than the maximum sequence length" warning.

    Long texts are expected here: the engine refuses a prompt past its own context limit with a
    clear error, and perplexity scoring windows a long text on purpose, so the tokenizer's
    model_max_length (often smaller than the engine's limit, or unset) would only mislead.
    """
    return tokenizer.encode(text, add_special_tokens=add_special_tokens, verbose=False)


@dataclass(frozen=True)
class PromptCharLimit:
    """The longest text a context could hold: `max_context_len` tokens of at most `chars_per_token`
    characters each. Longer text is refused before it is tokenized, which would only show it does not fit."""

    max_context_len: int
    chars_per_token: int

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, max_context_len: int) -> PromptCharLimit:
        return cls(max_context_len, longest_token_chars(tokenizer))

    @property
    def max_chars(self) -> int:
        return self.max_context_len * self.chars_per_token

    def check(self, text: str) -> None:
        if len(text) > self.max_chars:
            raise ContextLengthExceededError(
                f"the prompt has {len(text)} characters, more than this model's maximum context length of "
                f"{self.max_context_len} tokens could hold (at most {self.max_chars} characters, "
                f"{self.chars_per_token} per token); shorten the prompt"
            )


def longest_token_chars(tokenizer: PreTrainedTokenizerBase) -> int:
    """Characters of text one token can stand for, at most: its longest vocabulary entry.

    A byte-level entry spells each byte of its text with one character and a sentencepiece entry
    each character with one, so an entry is never shorter than the text it decodes to.
    """
    return max(map(len, tokenizer.get_vocab()), default=1)


def check_token_ids(token_ids: list[int], vocab_size: int, field: str) -> None:
    """Refuse ids outside the vocabulary, naming `field`, before the model or the tokenizer meets
    them: the tokenizer cannot even convert a negative or huge id, and would fail as a server bug."""
    for token_id in token_ids:
        if not 0 <= token_id < vocab_size:
            raise InvalidRequestError(
                f"{field}: token id {quote_value(token_id)} is out of range; token ids must be in [0, {vocab_size})", param=field,
            )
