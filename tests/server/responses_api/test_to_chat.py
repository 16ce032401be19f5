"""A Responses request as the chat request that serves it: an answer's items joined into one assistant turn,
outputs as tool messages, reasoning effort as thinking controls, text.format as response_format; and the chat
side's errors told back in the Responses request's names."""
from __future__ import annotations

from http import HTTPStatus

import pytest

from autoglm.server.openai.errors import APIError
from autoglm.server.responses_api.effort import thinking_controls
from autoglm.server.responses_api.error_names import in_responses_terms
from autoglm.server.responses_api.input_items import input_item_page
from autoglm.server.responses_api.protocol import ResponsesRequest
from autoglm.server.responses_api.to_chat import chat_request

CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"x": 1}'}


def translated(history: list[dict] | None = None, **fields: object):
    body = ResponsesRequest.model_validate({"input": "Hi", **fields})
    stored = ResponsesRequest.model_validate({"input": history}).input if history else []
    return chat_request(body, stored, reads_thinking=True)


def test_an_answers_items_join_one_assistant_turn_and_outputs_become_tool_messages():
    history = [{"role": "user", "content": "Go"},
               {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "Hmm."}]},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
               CALL, {**CALL, "call_id": "call_2"}]
    translation = translated(history, instructions="Be brief.", input=[
        {"type": "function_call_output", "call_id": "call_1", "output": "1"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "2"}]},
        {"role": "developer", "content": "Now sum."}])
    messages = [message.model_dump(exclude_none=True) for message in translation.request.messages]
    assert [message["role"] for message in messages] == ["system", "user", "assistant", "tool", "tool", "system"]
    answer = translation.request.messages[2]
    assert (answer.content, answer.reasoning_content) == ("On it.", "Hmm.")
    assert [(call.id, call.function.arguments) for call in answer.tool_calls] == [("call_1", '{"x": 1}'),
                                                                                  ("call_2", '{"x": 1}')]
    assert translation.content_paths == {0: "instructions", 3: "input[0].output", 4: "input[1].output",
                                         5: "input[2].content"}


def test_an_answer_out_of_order_starts_the_next_turn():
    history = [{"role": "assistant", "content": "One."}, {"role": "assistant", "content": "Two."}, CALL,
               {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Later."}]}]
    *answers, question = translated(history).request.messages
    assert [(answer.role, answer.content, answer.reasoning_content, bool(answer.tool_calls)) for answer in answers] == [
        ("assistant", "One.", None, False), ("assistant", "Two.", None, True), ("assistant", None, "Later.", False)]
    assert question.as_template_input() == {"role": "user", "content": "Hi"}


@pytest.mark.parametrize("effort, max_output_tokens, reads_thinking, kwargs, budget", [
    (None, 100, True, None, None),
    ("none", 100, True, {"enable_thinking": False}, None),
    ("minimal", None, True, {"enable_thinking": False}, None),
    ("low", 100, True, {"enable_thinking": True}, 25),
    ("medium", 100, True, {"enable_thinking": True}, 50),
    ("medium", 100, False, {"enable_thinking": True}, None),
    ("medium", None, True, {"enable_thinking": True}, None),
    ("high", 100, True, {"enable_thinking": True}, None),
])
def test_reasoning_effort_as_thinking_controls(effort, max_output_tokens, reads_thinking, kwargs, budget):
    controls = thinking_controls(effort, max_output_tokens, reads_thinking)
    assert (controls.template_kwargs, controls.token_budget) == (kwargs, budget)


def test_text_format_as_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    named = translated(text={"format": {"type": "json_schema", "name": "n", "schema": schema, "strict": True}})
    assert named.request.response_format.json_schema.schema_ == schema
    assert translated(text={"format": {"type": "json_object"}}).request.response_format.type == "json_object"
    assert translated(text={"format": {"type": "text"}}).request.response_format is None


def test_chat_errors_name_the_responses_fields():
    paths = {2: "input[1].content"}
    for chat, responses in [("max_completion_tokens must be at least 1", "max_output_tokens must be at least 1"),
                            ("messages[2].content[0]: cannot be read", "input[1].content[0]: cannot be read"),
                            ("messages[1].content[0]: cannot be read", "previous_response_id: cannot be read")]:
        param = chat.split(" ")[0].rstrip(":")
        error = in_responses_terms(APIError(HTTPStatus.BAD_REQUEST, chat, param=param), paths).body.error
        assert (error.message, error.param) == (responses, responses.split(" ")[0].rstrip(":"))


def test_input_items_page_after_an_item_and_refuse_an_unknown_cursor():
    items = [{"id": f"msg_{index}"} for index in range(3)]
    page = input_item_page(items, 1, "desc", "msg_2")
    assert (page.data, page.first_id, page.has_more) == ([{"id": "msg_1"}], "msg_1", True)
    with pytest.raises(APIError) as refused:
        input_item_page(items, 20, "asc", "msg_9")
    assert refused.value.body.error.param == "after"
