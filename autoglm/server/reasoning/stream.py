"""One choice's reasoning and content streamed: what each new piece of its text adds to either."""
from __future__ import annotations

from autoglm.server.reasoning.think_tags import ThinkTagParser
from autoglm.server.tool_calls.stream import extension


class ReasoningStream:
    """Feeds a choice's text to its parser as it grows and sends only what is new."""

    def __init__(self, parser: ThinkTagParser) -> None:
        self._parser = parser
        self._text = ""
        self._reasoning_sent = ""
        self._content_sent = ""

    def advance(self, text: str, final: bool) -> tuple[str, str]:
        """The reasoning and the content that `text`, the choice's next text, adds; `final` once the
        choice has finished."""
        self._text += text
        split = self._parser.parse(self._text, final)
        reasoning = extension(self._reasoning_sent, split.reasoning)
        content = extension(self._content_sent, split.content)
        self._reasoning_sent += reasoning
        self._content_sent += content
        return reasoning, content
