"""POST /v1/responses through the official openai client, on a scripted GLM-4.5-format model: an answer whole
and streamed (its thinking a reasoning item), a conversation continued through previous_response_id (the
prompt checked token for token), a function call and its output sent back, an answer cut off, reasoning
effort reaching the chat template, and what is not served refused naming the field."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.server.responses_api.conftest import MODEL
from tests.server.test_errors import error_of

pytestmark = pytest.mark.timeout(60)

THINKING, ANSWER = "The user greets me.", "Hello! How can I help?"
THINK_THEN_ANSWER = f"<think>{THINKING}</think>{ANSWER}"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER,
          "strict": True}]
CALL = ("<think>I should look it up.</think><tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Zürich</arg_value>\n</tool_call>")
# The stream of a thinking answer: each run of deltas as one.
STREAM_OF_THINKING_ANSWER = [
    "response.created", "response.in_progress",
    "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
    "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
    "response.output_item.added", "response.content_part.added", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.completed",
]


def runs(types: list[str]) -> list[str]:
    return [kind for index, kind in enumerate(types) if index == 0 or types[index - 1] != kind]


def test_an_answer_whole_and_streamed_with_its_thinking_apart(scripted):
    scripted.answer(THINK_THEN_ANSWER)
    client = scripted.server.openai()
    whole = client.responses.create(model=MODEL, input="Hi", instructions="Be kind.")
    assert whole.id.startswith("resp_") and whole.object == "response" and whole.status == "completed"
    assert (whole.model, whole.instructions, whole.store, whole.tool_choice) == (MODEL, "Be kind.", True, "auto")
    reasoning, message = whole.output
    assert reasoning.type == "reasoning" and [part.text for part in reasoning.content] == [THINKING]
    assert (message.type, message.role, message.status) == ("message", "assistant", "completed")
    assert message.content[0].annotations == [] and whole.output_text == ANSWER
    assert scripted.last_prompt() == scripted.rendered([{"role": "system", "content": "Be kind."},
                                                        {"role": "user", "content": "Hi"}])
    tokens = scripted.tokenizer.encode
    assert whole.usage.input_tokens == len(scripted.runner.last_prompt)
    assert whole.usage.output_tokens == len(tokens(THINK_THEN_ANSWER)) + 1  # and the end of the reply
    assert whole.usage.output_tokens_details.reasoning_tokens == len(tokens(f"<think>{THINKING}</think>"))

    events = list(client.responses.create(model=MODEL, input="Hi", instructions="Be kind.", stream=True))
    assert runs([event.type for event in events]) == STREAM_OF_THINKING_ANSWER
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = {kind: "".join(event.delta for event in events if event.type == kind)
              for kind in ("response.reasoning_text.delta", "response.output_text.delta")}
    assert deltas == {"response.reasoning_text.delta": THINKING, "response.output_text.delta": ANSWER}
    streamed = events[-1].response
    assert streamed.output_text == ANSWER and streamed.output[0].content[0].text == THINKING
    assert streamed.usage == whole.usage
    assert [event.item.id for event in events if event.type == "response.output_item.done"] == [
        item.id for item in streamed.output]
    assert client.responses.retrieve(streamed.id) == streamed  # stored before its last event went out


def test_previous_response_id_continues_the_conversation_without_its_instructions(scripted):
    client = scripted.server.openai()
    scripted.answer(THINK_THEN_ANSWER)
    first = client.responses.create(model=MODEL, input="Hi", instructions="Be kind.")
    scripted.answer("Paris.")
    second = client.responses.create(model=MODEL, input="Capital of France?", previous_response_id=first.id,
                                     instructions="Be brief.")
    conversation = [{"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": ANSWER, "reasoning_content": THINKING},
                    {"role": "user", "content": "Capital of France?"}]
    assert second.previous_response_id == first.id and second.output_text == "Paris."
    assert scripted.last_prompt() == scripted.rendered([{"role": "system", "content": "Be brief."}, *conversation])
    assert second.usage.input_tokens == len(scripted.runner.last_prompt)

    scripted.answer("Berlin.")
    client.responses.create(model=MODEL, input="And Germany?", previous_response_id=second.id)
    assert scripted.last_prompt() == scripted.rendered([*conversation, {"role": "assistant", "content": "Paris."},
                                                        {"role": "user", "content": "And Germany?"}])


def test_a_conversation_sent_back_whole_unstored_with_its_encrypted_thinking(scripted):
    """As clients that store nothing (Codex CLI) carry a conversation: the output items sent back as input, the
    thinking in its encrypted copy alone; the template shows it, the answer's turn being after the last user's."""
    client = scripted.server.openai()
    scripted.answer(CALL)
    called = client.responses.create(model=MODEL, input="Weather in Zürich?", tools=TOOLS, store=False,
                                     include=["reasoning.encrypted_content"])
    thinking, call = called.output
    assert thinking.encrypted_content == "I should look it up."
    scripted.answer("Sunny.")
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    client.responses.create(model=MODEL, tools=TOOLS, store=False, input=[
        {"role": "user", "content": "Weather in Zürich?"}, thinking.model_dump(exclude={"content"}), call.model_dump(),
        result])
    assert "<|assistant|>\n<think>I should look it up.</think>\n<tool_call>get_weather" in scripted.last_prompt()
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(called.id)


def test_a_function_call_then_its_output_sent_back(scripted):
    client = scripted.server.openai()
    scripted.answer(CALL)
    called = client.responses.create(model=MODEL, input="Weather in Zürich?", tools=TOOLS)
    reasoning, call = called.output
    assert reasoning.type == "reasoning" and call.type == "function_call" and call.status == "completed"
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Zürich"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_") and called.output_text == ""
    assert called.tools[0].name == "get_weather" and called.tools[0].strict is True

    events = list(client.responses.create(model=MODEL, input="Weather in Zürich?", tools=TOOLS, stream=True))
    arguments = "".join(event.delta for event in events if event.type == "response.function_call_arguments.delta")
    (done,) = [event for event in events if event.type == "response.function_call_arguments.done"]
    assert arguments == done.arguments == call.arguments and done.name == "get_weather"
    assert events[-1].response.output[1].arguments == call.arguments

    scripted.answer("It is sunny in Zürich.")
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 °C"}
    answered = client.responses.create(model=MODEL, input=[result], previous_response_id=called.id, tools=TOOLS)
    assert answered.output_text == "It is sunny in Zürich."
    prompt = scripted.last_prompt()
    asked, made, returned = (prompt.index(text) for text in (
        "Weather in Zürich?", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>",
        "<|observation|>\n<tool_response>\nsunny, 21 °C\n</tool_response>"))
    assert asked < made < returned and prompt.endswith("<|assistant|>")
    assert "<think>I should look it up.</think>" in prompt  # the stored answer's thinking, in its turn

    with pytest.raises(openai.BadRequestError) as unknown_call:
        client.responses.create(model=MODEL, input=[{**result, "call_id": "call_unknown"}], tools=TOOLS)
    assert unknown_call.value.body["param"] == "input[0].call_id" and "call_unknown" in unknown_call.value.message


def test_an_answer_cut_at_max_output_tokens_is_incomplete(scripted):
    scripted.answer("An answer that goes on and on.")
    client = scripted.server.openai()
    cut = client.responses.create(model=MODEL, input="Hi", max_output_tokens=4)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert cut.output[0].status == "incomplete" and cut.usage.output_tokens == 4 and cut.max_output_tokens == 4
    events = list(client.responses.create(model=MODEL, input="Hi", max_output_tokens=4, stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == cut.output_text


def test_reasoning_effort_none_turns_the_templates_thinking_off(scripted):
    scripted.answer("Fine.")
    client = scripted.server.openai()
    answer = client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "minimal", "summary": "auto"})
    assert answer.reasoning.effort == "minimal" and answer.output_text == "Fine."
    assert scripted.last_prompt() == scripted.rendered([{"role": "user", "content": "Hi"}], enable_thinking=False)
    client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "high"})
    assert scripted.last_prompt() == scripted.rendered([{"role": "user", "content": "Hi"}], enable_thinking=True)


@pytest.mark.parametrize("fields, param, words", [
    ({"background": True}, "background", "background is not supported"),
    ({"truncation": "auto"}, "truncation", 'accepts only null or "disabled"'),
    ({"conversation": "conv_1"}, "conversation", "conversation is not supported"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "only function tools"),
    ({"tools": [*TOOLS, {"type": "mcp", "server_label": "x"}]}, "tools[1].type", "'mcp', a built-in tool"),
    ({"tool_choice": {"type": "file_search"}}, "tool_choice.type", "'file_search'"),
    ({"include": ["file_search_call.results"]}, "include", "'file_search_call.results'"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "'item_reference'"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]},
     "input[0].content[0].type", "'input_file'"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
     "input[0].content[0].file_id", "image_url"),
    ({"temperture": 0.5}, "temperture", "did you mean 'temperature'?"),
    ({"max_output_tokens": 0}, "max_output_tokens", "max_output_tokens must be"),
    ({"tools": TOOLS, "tool_choice": "required",
      "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}},
     "tool_choice", "text.format.schema also constrains"),
    ({"previous_response_id": "resp_nothing"}, "previous_response_id", "'resp_nothing' not found"),
])
def test_what_is_not_served_is_refused_naming_the_field(scripted, fields, param, words):
    answer = httpx.post(scripted.server.url + "/v1/responses", json={"model": MODEL, "input": "Hi", **fields},
                        timeout=30)
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert error["param"] == param and words in error["message"], error
