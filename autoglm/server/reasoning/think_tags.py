"""Thinking written between a start and an end marker (<think> and </think>) ahead of the answer."""
from __future__ import annotations

from autoglm.server.reasoning.split import ReasoningSplit
from autoglm.server.tool_calls.parsed import held_back_length, skip_whitespace
from autoglm.thinking import ThinkingPhase


class ThinkTagParser:
    """Splits a model's text into reasoning and content, given where the prompt left thinking: open,
    the text is thinking up to the end marker (all of it if none comes); closed, it is all answer; not
    begun, it is thinking only if it opens with the start marker, and all answer otherwise.

    Like a tool-call parser, with ``final`` false the text is a prefix of what the model will write,
    and both parts only grow as more arrives: text that may be the start of a marker is held back.
    The templates put a newline after the end marker, so an answer that follows one (in the text or
    in the prompt) drops the newlines that open it.
    """

    def __init__(self, start: str, end: str, phase: ThinkingPhase, *, skips_leading_start: bool = False) -> None:
        self._start = start
        self._end = end
        self._phase = phase
        # Whether a start marker opening the output (after whitespace) is skipped though thinking is
        # open already: a model that always thinks may write it again, or not.
        self._skips_leading_start = skips_leading_start

    def parse(self, text: str, final: bool) -> ReasoningSplit:
        if self._phase is ThinkingPhase.CLOSED:  # the end marker is the prompt's
            return ReasoningSplit("", _answer(text), ended=False)
        lead = skip_whitespace(text, 0)
        reads_start = self._phase is ThinkingPhase.NOT_BEGUN or self._skips_leading_start
        if reads_start and text.startswith(self._start, lead):
            return self._thinking_from(text, lead + len(self._start), final)
        if reads_start and not final and self._start.startswith(text[lead:]):
            return ReasoningSplit("", "", ended=False)  # the start marker may be on its way
        if self._phase is ThinkingPhase.NOT_BEGUN:
            return ReasoningSplit("", text, ended=False)
        return self._thinking_from(text, 0, final)

    def _thinking_from(self, text: str, start: int, final: bool) -> ReasoningSplit:
        """Thinking from `start` to the end marker, the answer after it."""
        end_at = text.find(self._end, start)
        if end_at < 0:
            thinking = text[start:]
            shown = thinking if final else thinking[:len(thinking) - held_back_length(thinking, self._end)]
            return ReasoningSplit(shown, "", ended=False)
        return ReasoningSplit(text[start:end_at], _answer(text[end_at + len(self._end):]), ended=True)


def _answer(text: str) -> str:
    return text.lstrip("\n")
