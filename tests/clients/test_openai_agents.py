"""The OpenAI Agents SDK on its chat-completions model (tracing off): an agent forced to call a tool runs it,
sends the result back in the history the SDK writes, and ends on the model's text; streamed the same."""
from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import pytest
from openai import AsyncOpenAI
from pydantic import Field

from tests.clients.replies import MODEL, PROMPT, STRUCTURED_MAX_TOKENS, get_weather
from tests.optional_packages import import_client, needs_xgrammar

agents = import_client("agents", "openai-agents")

pytestmark = [pytest.mark.timeout(120), needs_xgrammar]

NO_TRACING = agents.RunConfig(tracing_disabled=True)  # nothing sent to OpenAI's trace exporter


def weather_agent(server, calls: list[dict]) -> object:
    """An agent whose first turn must call its weather tool (the SDK then lets the model choose); each call is
    recorded in `calls`."""
    @agents.function_tool
    def weather(city: Annotated[str, Field(max_length=8)], unit: Literal["celsius", "fahrenheit"]) -> str:
        """The weather in a city."""
        calls.append({"city": city, "unit": unit})
        return get_weather(city, unit)

    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    return agents.Agent(
        name="forecaster", instructions="Answer briefly.", tools=[weather],
        model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=agents.ModelSettings(tool_choice="weather", temperature=0,
                                            max_tokens=STRUCTURED_MAX_TOKENS))


def item_kinds(result) -> list[str]:
    return [item.type for item in result.new_items]


async def run_streamed(agent) -> object:
    result = agents.Runner.run_streamed(agent, PROMPT, max_turns=3, run_config=NO_TRACING)
    async for _ in result.stream_events():
        pass
    return result


def test_agent_calls_the_forced_tool_and_answers_from_its_result(client_server):
    calls = []
    result = agents.Runner.run_sync(weather_agent(client_server, calls), PROMPT, max_turns=3, run_config=NO_TRACING)
    assert item_kinds(result) == ["tool_call_item", "tool_call_output_item", "message_output_item"]
    (call,) = calls
    assert len(call["city"]) <= 8 and call["unit"] in ("celsius", "fahrenheit")
    assert isinstance(result.final_output, str)

    streamed_calls = []
    streamed = asyncio.run(run_streamed(weather_agent(client_server, streamed_calls)))
    assert item_kinds(streamed) == item_kinds(result)
    assert streamed_calls == calls and streamed.final_output == result.final_output  # greedy: the same run
