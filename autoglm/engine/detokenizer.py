"""Turns a request's output tokens into text as they arrive, and finds its stop strings.

Decoding token by token breaks characters that span several tokens and loses the leading
spaces some tokenizers attach to a word. So each step decodes a short window that starts a
few tokens back, and emits only what the newest tokens add to it, once that no longer ends
in a partial character.
"""
from __future__ import annotations

from typing import Protocol

from autoglm.sampling_params import SamplingParams

# How many prompt tokens seed the first window, so the first output token decodes in context.
PROMPT_CONTEXT_TOKENS = 5
REPLACEMENT_CHAR = "\ufffd"  # what a partial UTF-8 byte sequence decodes to


class Tokenizer(Protocol):
    """The one method the detokenizer needs, as Hugging Face tokenizers spell it."""

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ..., **kwargs: object) -> str: ...


class IncrementalDetokenizer:
    """Output text of one request, built token by token, cut at the first stop string."""

    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: list[int], params: SamplingParams) -> None:
        self._tokenizer = tokenizer
        self._params = params
        self._longest_stop = max((len(stop) for stop in params.stop), default=0)
        context = prompt_token_ids[-PROMPT_CONTEXT_TOKENS:]
        # A prompt ending inside a character cannot give the output a clean starting point.
        if self._decode(context).endswith(REPLACEMENT_CHAR):
            context = []
        self._token_ids = list(context)  # the prompt context, then every output token
        # The window [prefix_offset, read_offset) holds tokens already turned into text;
        # tokens from read_offset on have not been emitted yet.
        self._prefix_offset = 0
        self._read_offset = len(context)
        self._text = ""  # output text of the tokens before read_offset, cut at a stop string
        self._unsettled_text = ""  # text of the tokens from read_offset on: ends in a partial character
        self._sent = 0  # characters of the text already handed out by take_delta
        self._matched_stop: str | None = None
        self._num_output_tokens = 0

    @property
    def output_text(self) -> str:
        """Full text so far, without the stop string unless the request asked to keep it."""
        return self._text + self._unsettled_text

    def add_tokens(self, token_ids: list[int]) -> str | None:
        """Feeds new output tokens; returns the stop string that now occurs, if any.

        Tokens after a matched stop string in the same call are ignored: the text ends there.
        """
        if self._matched_stop is not None:
            raise RuntimeError(
                f"add_tokens called after the stop string {self._matched_stop!r} matched; "
                f"the request must not produce more tokens"
            )
        for token_id in token_ids:
            self._token_ids.append(token_id)
            self._num_output_tokens += 1
            new_text = self._decode_new_tokens()
            if new_text:
                self._matched_stop = self._append_and_find_stop(new_text)
                if self._matched_stop is not None:
                    break
        return self._matched_stop

    def take_delta(self, finished: bool) -> str:
        """Text not yet handed out.

        Until the request finishes, the last ``len(longest stop) - 1`` characters stay back, since
        they could still start a stop string, and so does a partial character. When finished,
        everything left is returned.
        """
        text = self.output_text
        if finished or self._matched_stop is not None:
            end = len(text)
        else:
            end = len(self._text) - max(self._longest_stop - 1, 0)
        if end <= self._sent:
            return ""
        delta, self._sent = text[self._sent:end], end
        return delta

    def _decode_new_tokens(self) -> str:
        """Text the tokens from read_offset on add to the window, which then moves past them; or ""
        while that text ends in a partial character (kept in ``_unsettled_text`` until a later
        token completes it)."""
        window_text = self._decode(self._token_ids[self._prefix_offset:self._read_offset])
        extended_text = self._decode(self._token_ids[self._prefix_offset:])
        added = extended_text[len(window_text):]
        if not added or added.endswith(REPLACEMENT_CHAR):
            self._unsettled_text = added
            return ""
        self._unsettled_text = ""
        self._prefix_offset, self._read_offset = self._read_offset, len(self._token_ids)
        return added

    def _append_and_find_stop(self, new_text: str) -> str | None:
        """Appends text and looks for a stop string in it, including one that begins in the
        last ``len(stop) - 1`` characters before it; cuts the text at the earliest match."""
        old_length = len(self._text)
        self._text += new_text
        if self._num_output_tokens < self._params.min_tokens:  # stop strings count only after min_tokens
            return None
        earliest: tuple[int, str] | None = None
        for stop in self._params.stop:
            index = self._text.find(stop, max(old_length - len(stop) + 1, 0))
            if index != -1 and (earliest is None or index < earliest[0]):
                earliest = (index, stop)
        if earliest is None:
            return None
        index, stop = earliest
        self._text = self._text[:index + len(stop) if self._params.include_stop_str_in_output else index]
        return stop

    def _decode(self, token_ids: list[int]) -> str:
        # Cleaning up spaces around punctuation depends on the neighbouring text, so it would make
        # a window's text differ from the same tokens' text inside the whole output.
        return self._tokenizer.decode(
            token_ids,
            skip_special_tokens=self._params.skip_special_tokens,
            clean_up_tokenization_spaces=False,
        )
