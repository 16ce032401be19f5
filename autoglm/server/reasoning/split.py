"""What a reasoning parser reads out of a model's text."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReasoningSplit:
    reasoning: str  # the thinking, without its markers
    content: str  # the answer
    ended: bool  # the end-of-thinking marker was read in the text (never in text that did not think)
