"""A conversation with tool calls and results renders through GLM-4's templates in the shapes they
know: calls as assistant turns named by their metadata, results as observation turns."""
from __future__ import annotations

import pytest

from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.openai.protocol import ChatMessage
from autoglm.server.openai.chat_prompt import ChatRendering, render_chat_prompt
from autoglm.server.tool_calls.families import tool_call_family
from autoglm.server.tool_calls.glm4_history import glm4_history
from tests.server.tool_calls.templates import GLM4_0414_TEMPLATE, GLM4_9B_CHAT_TEMPLATE, QWEN_TEMPLATE
from tests.tiny_models import build_tiny_tokenizer

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Nice"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
]
# What both templates render for CONVERSATION, after the tools.
RENDERED_TURNS = ('<|user|>\nWeather in Paris?<|assistant|>get_weather\n{"city": "Paris"}'
                  '<|assistant|>get_weather\n{"city": "Nice"}<|observation|>\nsunny<|observation|>\nrain<|assistant|>')


def render(template: str, messages: list[dict[str, object]]) -> str:
    tokenizer = build_tiny_tokenizer(512)
    tokenizer.chat_template = template
    rendered = render_chat_prompt(tokenizer, [ChatMessage.model_validate(m) for m in messages], ChatRendering(),
                                  PromptCharLimit.of(tokenizer, 4096), tools=TOOLS)
    return tokenizer.decode(rendered.token_ids)


@pytest.mark.parametrize("template", [GLM4_0414_TEMPLATE, GLM4_9B_CHAT_TEMPLATE], ids=["GLM-4-0414", "GLM-4-9B-Chat"])
def test_calls_and_results_render_in_glm4s_shapes_with_the_tools(template):
    assert tool_call_family(template).name == "GLM-4"
    rendered = render(template, CONVERSATION)
    assert rendered.startswith("[gMASK]<sop><|system|>\n# Tools") and "## get_weather<|user|>" in rendered
    assert rendered.endswith(RENDERED_TURNS)


def test_a_system_turn_carries_the_tools_where_the_template_reads_them_from_a_message():
    history = glm4_history([{"role": "system", "content": "Be brief."}], TOOLS, GLM4_9B_CHAT_TEMPLATE)
    assert history == [{"role": "system", "content": "Be brief.", "tools": TOOLS}]
    assert glm4_history([{"role": "system", "content": "Be brief."}], TOOLS, GLM4_0414_TEMPLATE) == [
        {"role": "system", "content": "Be brief."}]


def test_text_beside_calls_stays_its_own_turn_before_them():
    history = glm4_history([{"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": "é"}}}]}], None, GLM4_0414_TEMPLATE)
    assert history == [{"role": "assistant", "content": "Checking."},
                       {"role": "assistant", "metadata": "f", "content": '{"a": "é"}'}]


def test_other_families_get_openais_shapes():
    rendered = render(QWEN_TEMPLATE, CONVERSATION)
    assert "<tool_response>\nsunny\n</tool_response>" in rendered and "<tool_call>" in rendered
