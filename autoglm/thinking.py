"""Where a reply's thinking stands when generation starts, and the bounds a request puts on it.

Models that think write their reasoning between a start and an end marker (``<think>`` and
``</think>``) before the answer. The server reads from the prompt whether this turn's thinking is
already open, closed, or left for the model to open; the engine uses that to count thinking tokens
against a budget and to start a grammar only where the answer starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ThinkingPhase(Enum):
    OPEN = "open"  # the prompt ends inside an open thinking block: the output starts as thinking
    CLOSED = "closed"  # the prompt closed this turn's thinking (thinking switched off): all answer
    NOT_BEGUN = "not_begun"  # the model may open thinking itself, with the start marker first


@dataclass(frozen=True)
class ThinkingBounds:
    """The thinking markers as single tokens, the phase at the output's start, and the budget: after
    ``budget`` thinking tokens the end token is forced, and the answer follows (None: no budget)."""

    start_token_id: int
    end_token_id: int
    phase: ThinkingPhase
    budget: int | None = None
