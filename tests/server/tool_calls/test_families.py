"""Tool-call formats by the names the server's setting takes, and as told by chat templates."""
from __future__ import annotations

import json

import pytest

from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.tool_calls.families import (TOOL_CALL_PARSERS, known_families,
                                                tool_call_family, tool_call_family_named)
from autoglm.server.tool_calls.glm4 import Glm4ToolCallParser
from autoglm.server.tool_calls.glm45 import Glm45ToolCallParser, Glm47ToolCallParser
from autoglm.server.tool_calls.hermes import HermesToolCallParser
from autoglm.server.tool_calls.llama3_json import Llama3JsonToolCallParser
from autoglm.server.tool_calls.tool_use import plan_tool_use
from tests.server.tool_calls.replies import TOOLS
from tests.server.tool_calls.templates import (GLM4_0414_TEMPLATE, GLM4_9B_CHAT_TEMPLATE, GLM45_TEMPLATE,
                                               GLM47_TEMPLATE, QWEN_TEMPLATE)

GLM_TAGS = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
# A template in Llama 3.1's manner, reduced to what tells it apart.
LLAMA3_TEMPLATE = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}<|python_tag|>"


@pytest.mark.parametrize("key, parser_class, markers", [
    ("glm45", Glm45ToolCallParser, GLM_TAGS),
    ("glm47", Glm47ToolCallParser, GLM_TAGS),
    ("hermes", HermesToolCallParser, ("<tool_call>", "</tool_call>")),
    ("qwen3", HermesToolCallParser, ("<tool_call>", "</tool_call>")),
    ("llama3_json", Llama3JsonToolCallParser, ("<|python_tag|>",)),
    ("glm4", Glm4ToolCallParser, ()),
])
def test_each_parser_is_found_by_its_name_with_the_markers_it_writes(key, parser_class, markers):
    family = tool_call_family_named(key)
    assert family.key == key and family.markers == markers
    assert type(family.new_parser(TOOLS)) is parser_class


def test_an_unknown_parser_name_is_refused_with_the_known_ones():
    assert list(TOOL_CALL_PARSERS) == ["glm45", "glm47", "hermes", "qwen3", "llama3_json", "glm4"]
    with pytest.raises(ValueError) as refused:
        tool_call_family_named("glm-4.5")
    assert str(refused.value) == ("unknown tool-call parser 'glm-4.5'; known: glm45, glm47, hermes, qwen3, "
                                  "llama3_json, glm4")


@pytest.mark.parametrize("template, key", [
    (GLM45_TEMPLATE, "glm45"),
    (GLM47_TEMPLATE, "glm47"),
    (QWEN_TEMPLATE, "hermes"),
    (LLAMA3_TEMPLATE, "llama3_json"),
    (GLM4_0414_TEMPLATE, "glm4"),
    (GLM4_9B_CHAT_TEMPLATE, "glm4"),
])
def test_a_template_is_recognised_by_the_calls_it_teaches(template, key):
    assert tool_call_family(template).key == key


@pytest.mark.parametrize("template", [None, "", "{% for m in messages %}{{ m.content }}{% endfor %}"])
def test_a_template_that_teaches_no_known_format_is_recognised_as_none(template):
    assert tool_call_family(template) is None


def test_the_formats_a_template_may_teach_are_named_once_each():
    assert known_families() == ("GLM-4.5/GLM-4.6 <tool_call> with <arg_key> lines, GLM-4.7 <tool_call> with <arg_key>, "
                                "Qwen2.5/Qwen3 <tool_call>, Llama 3.1 JSON, GLM-4")


def test_auto_reads_glm45_calls_with_the_types_the_tools_declare():
    request = ChatCompletionRequest.model_validate({
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {"name": name, "parameters": parameters}}
                  for name, parameters in TOOLS.items()]})
    parser = plan_tool_use(request, GLM45_TEMPLATE).new_parser()
    reply = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>7</arg_value>\n"
             "<arg_key>days</arg_key>\n<arg_value>7</arg_value>\n</tool_call>")
    assert json.loads(parser.parse(reply, final=True).calls[0].arguments) == {"city": "7", "days": 7}
