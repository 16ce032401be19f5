"""What the clients ask for, and what the official openai client gets for the same request: the reference a
third-party client's reading of a reply is checked against."""
from __future__ import annotations

from typing import Literal

from openai.types.chat import ChatCompletion
from pydantic import BaseModel, Field

from tests.server.live_server import RunningServer

MODEL = "tiny-qwen"
PROMPT = "What is the weather in Paris?"
GREEDY = {"temperature": 0, "max_tokens": 8}
# Long enough for a random model held to a bounded schema to close every value.
STRUCTURED_MAX_TOKENS = 120


class Weather(BaseModel):
    """Bounded, so that a random model writing under the schema's grammar must finish within a few tokens."""

    city: str = Field(max_length=8)
    unit: Literal["celsius", "fahrenheit"]
    days: int = Field(ge=1, le=7)


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """The weather in a city."""
    return f"sunny in {city}, 20 degrees {unit}"


def openai_reply(server: RunningServer, **fields: object) -> ChatCompletion:
    """The official openai client's greedy chat reply to PROMPT."""
    return server.openai().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], **{**GREEDY, **fields})
