"""A streamed reply's output items as they grow, and the named, numbered events that tell the client.

Each item opens when its first piece arrives (``response.output_item.added``, then its content part's
``added`` where it has one), grows by deltas, and is done (``.done`` events, last the item's own) once it
can grow no more: the thinking as soon as the answer begins, the text and the calls when the reply ends.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, TypeVar

from autoglm.server.openai.chat_reply import ReplyPiece
from autoglm.server.openai.streaming import sse_event
from autoglm.server.responses_api.items import new_id
from autoglm.server.responses_api.objects import (
    FunctionCallMade,
    ItemStatus,
    OutputItem,
    OutputTextPart,
    ReasoningTextPart,
)
from autoglm.server.responses_api.reply_items import message_output, reasoning_output


class EventNumbers:
    """Writes a stream's events, each named by its type and numbered in the order sent."""

    def __init__(self) -> None:
        self._next = 0

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self._next, **fields}
        self._next += 1
        return sse_event(json.dumps(data, ensure_ascii=False), kind)


class _StreamedItem(ABC):
    def __init__(self, item_id: str, output_index: int) -> None:
        self.id = item_id
        self.output_index = output_index
        self.status: ItemStatus = "in_progress"
        self.text = ""

    @abstractmethod
    def output(self) -> OutputItem:
        """The item as it stands."""

    @abstractmethod
    def opening(self, events: EventNumbers) -> list[str]: ...

    @abstractmethod
    def adding(self, piece: str, events: EventNumbers) -> list[str]: ...

    @abstractmethod
    def closing(self, events: EventNumbers) -> list[str]: ...

    def add(self, piece: str, events: EventNumbers) -> list[str]:
        self.text += piece
        return self.adding(piece, events)

    def finish(self, status: ItemStatus, events: EventNumbers) -> list[str]:
        self.status = status
        return self.closing(events) + [events.event("response.output_item.done", output_index=self.output_index,
                                                    item=self.output().model_dump(mode="json"))]

    def _added(self, events: EventNumbers, item: OutputItem) -> str:
        return events.event("response.output_item.added", output_index=self.output_index,
                            item=item.model_dump(mode="json"))

    def _place(self) -> dict[str, Any]:
        return {"item_id": self.id, "output_index": self.output_index}


class _Thinking(_StreamedItem):
    def __init__(self, item_id: str, output_index: int, shows_encrypted: bool) -> None:
        super().__init__(item_id, output_index)
        self.shows_encrypted = shows_encrypted

    def output(self) -> OutputItem:
        return reasoning_output(self.id, self.text, self.status, self.shows_encrypted)

    def opening(self, events: EventNumbers) -> list[str]:
        empty = self.output().model_copy(update={"content": [], "encrypted_content": None})
        return [self._added(events, empty), events.event("response.content_part.added", **self._place(),
                                                          content_index=0, part=_reasoning_part(""))]

    def adding(self, piece: str, events: EventNumbers) -> list[str]:
        return [events.event("response.reasoning_text.delta", **self._place(), content_index=0, delta=piece)]

    def closing(self, events: EventNumbers) -> list[str]:
        return [events.event("response.reasoning_text.done", **self._place(), content_index=0, text=self.text),
                events.event("response.content_part.done", **self._place(), content_index=0,
                             part=_reasoning_part(self.text))]


class _Text(_StreamedItem):
    def output(self) -> OutputItem:
        return message_output(self.id, self.text, self.status)

    def opening(self, events: EventNumbers) -> list[str]:
        return [self._added(events, self.output().model_copy(update={"content": []})),
                events.event("response.content_part.added", **self._place(), content_index=0, part=_text_part(""))]

    def adding(self, piece: str, events: EventNumbers) -> list[str]:
        return [events.event("response.output_text.delta", **self._place(), content_index=0, delta=piece,
                             logprobs=[])]

    def closing(self, events: EventNumbers) -> list[str]:
        return [events.event("response.output_text.done", **self._place(), content_index=0, text=self.text,
                             logprobs=[]),
                events.event("response.content_part.done", **self._place(), content_index=0,
                             part=_text_part(self.text))]


class _Call(_StreamedItem):
    def __init__(self, item_id: str, output_index: int, call_id: str, name: str) -> None:
        super().__init__(item_id, output_index)
        self.call_id = call_id
        self.name = name

    def output(self) -> OutputItem:
        return FunctionCallMade(id=self.id, call_id=self.call_id, name=self.name, arguments=self.text,
                                status=self.status)

    def opening(self, events: EventNumbers) -> list[str]:
        return [self._added(events, self.output())]

    def adding(self, piece: str, events: EventNumbers) -> list[str]:
        return [events.event("response.function_call_arguments.delta", **self._place(), delta=piece)]

    def closing(self, events: EventNumbers) -> list[str]:
        return [events.event("response.function_call_arguments.done", **self._place(), name=self.name,
                             arguments=self.text)]


Item = TypeVar("Item", bound=_StreamedItem)


class StreamedOutput:
    """The output items of one streamed reply, from its pieces (the chat side's reading of each delta)."""

    def __init__(self, events: EventNumbers, shows_encrypted: bool) -> None:
        self._events = events
        self._shows_encrypted = shows_encrypted
        self._items: list[_StreamedItem] = []
        self._thinking: _Thinking | None = None
        self._text: _Text | None = None
        self._calls: dict[int, _Call] = {}  # by the call's index in the reply

    def advance(self, piece: ReplyPiece) -> list[str]:
        sent: list[str] = []
        if piece.reasoning:
            if self._thinking is None:
                self._thinking = self._open(_Thinking(new_id("rs"), len(self._items), self._shows_encrypted), sent)
            sent += self._thinking.add(piece.reasoning, self._events)
        if (piece.content or piece.calls) and self._thinking is not None and self._thinking.status == "in_progress":
            sent += self._thinking.finish("completed", self._events)
        if piece.content:
            if self._text is None:
                self._text = self._open(_Text(new_id("msg"), len(self._items)), sent)
            sent += self._text.add(piece.content, self._events)
        for call in piece.calls:
            if call.id is not None:
                self._calls[call.index] = self._open(_Call(new_id("fc"), len(self._items), call.id, call.name or ""),
                                                     sent)
            sent += self._calls[call.index].add(call.arguments, self._events)
        return sent

    def finish(self, status: ItemStatus) -> list[str]:
        """Every item not yet done, done with `status`; a reply that wrote nothing gets its empty message."""
        sent: list[str] = []
        if not self._items:
            self._open(_Text(new_id("msg"), 0), sent)
        for item in self._items:
            if item.status == "in_progress":
                sent += item.finish(status, self._events)
        return sent

    def items(self) -> list[OutputItem]:
        return [item.output() for item in self._items]

    def _open(self, item: Item, sent: list[str]) -> Item:
        self._items.append(item)
        sent += item.opening(self._events)
        return item


def _reasoning_part(text: str) -> dict[str, Any]:
    return ReasoningTextPart(text=text).model_dump(mode="json")


def _text_part(text: str) -> dict[str, Any]:
    return OutputTextPart(text=text).model_dump(mode="json")
