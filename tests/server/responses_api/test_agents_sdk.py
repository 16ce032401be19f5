"""The OpenAI Agents SDK on its default model, the Responses API's (tracing off), pointed at the server: one
agent with one function tool calls it, gets its result back through the history the SDK sends, and ends
on the model's answer, whole and streamed."""
from __future__ import annotations

import asyncio

import pytest
from openai import AsyncOpenAI

from autoglm.engine.sequence import Sequence
from tests.optional_packages import import_client
from tests.server.responses_api.conftest import MODEL, PromptKeepingRunner, start_scripted

agents = import_client("agents", "openai-agents")

pytestmark = pytest.mark.timeout(60)

CALL = ("<think>I should look it up.</think><tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Paris</arg_value>\n</tool_call>")
ANSWER = "It is sunny in Paris."
# Where the GLM-4.5 template writes a tool's result back into the conversation.
TOOL_RESULT_MARK = "<|observation|>"


class ToolThenAnswer(PromptKeepingRunner):
    """Calls the tool until the prompt holds its result, then answers."""

    def __init__(self, tokenizer) -> None:
        super().__init__(len(tokenizer), tokenizer.eos_token_id)
        self.call, self.answer = (tokenizer.encode(text, add_special_tokens=False) for text in (CALL, ANSWER))
        self.result_mark = tokenizer.convert_tokens_to_ids(TOOL_RESULT_MARK)

    def next_token_at(self, seq: Sequence, position: int) -> int:
        self.scripts = [self.answer if self.result_mark in seq.token_ids[:seq.num_prompt_tokens] else self.call]
        return super().next_token_at(seq, position)


@pytest.fixture(scope="module")
def agent_server(glm45_model, glm45_tokenizer, tmp_path_factory):
    running = start_scripted(glm45_model, glm45_tokenizer, ToolThenAnswer(glm45_tokenizer),
                             data_dir=str(tmp_path_factory.mktemp("data")))
    yield running
    running.server.stop()


def run_config(server) -> object:
    """The SDK's default model provider (the Responses API's) with a client of this server, for one event loop;
    no tracing."""
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    return agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client), tracing_disabled=True)


def weather_agent(calls: list[str]) -> object:
    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    return agents.Agent(name="forecaster", instructions="Answer briefly.", tools=[get_weather], model=MODEL)


async def run_streamed(agent, config) -> object:
    result = agents.Runner.run_streamed(agent, "What is the weather in Paris?", max_turns=3, run_config=config)
    async for _ in result.stream_events():
        pass
    return result


def test_an_agent_calls_its_tool_and_answers_from_the_result(agent_server):
    calls: list[str] = []
    result = asyncio.run(agents.Runner.run(weather_agent(calls), "What is the weather in Paris?", max_turns=3,
                                           run_config=run_config(agent_server.server)))
    assert [item.type for item in result.new_items] == [
        "reasoning_item", "tool_call_item", "tool_call_output_item", "message_output_item"]
    assert calls == ["Paris"] and result.final_output == ANSWER
    first, second = result.raw_responses
    assert first.response_id.startswith("resp_") and second.usage.input_tokens > first.usage.input_tokens
    assert "<tool_response>\nsunny in Paris\n</tool_response>" in agent_server.last_prompt()

    streamed_calls: list[str] = []
    streamed = asyncio.run(run_streamed(weather_agent(streamed_calls), run_config(agent_server.server)))
    assert [item.type for item in streamed.new_items] == [item.type for item in result.new_items]
    assert streamed_calls == calls and streamed.final_output == ANSWER
