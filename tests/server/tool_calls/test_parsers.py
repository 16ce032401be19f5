"""Each family's parser on hand-written replies of its family, whole and streamed: the stream's
pieces add up to exactly what the whole reply parses to, and calls written as JSON send their
arguments as they are written, however the text is cut."""
from __future__ import annotations

import json
import re

import pytest

from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.tool_calls.families import tool_call_family_named
from autoglm.server.tool_calls.forced import CallArrayParser, NamedFunctionParser
from autoglm.server.tool_calls.glm4 import Glm4ToolCallParser
from autoglm.server.tool_calls.hermes import HermesToolCallParser
from autoglm.server.tool_calls.llama3_json import Llama3JsonToolCallParser
from autoglm.server.tool_calls.parsed import FirstCallOnly, ParsedOutput, ToolCallParser, ToolCallText
from autoglm.server.tool_calls.stream import ToolCallStream, visible_content
from autoglm.server.tool_calls.tool_use import plan_tool_use
from tests.server.tool_calls.replies import CODE, FILTERS, PATH, TOOLS, Transcript
from tests.server.tool_calls.streaming import SPLITS, split, stream_calls, train_tokenizer
from tests.server.tool_calls.templates import QWEN_TEMPLATE

NAMES = dict.fromkeys(["get_weather", "get_time"])  # the declared tools, without parameters
WEATHER = '{"city": "Paris", "unit": "celsius"}'
TIME = '{"zone": "UTC{+1}", "note": "say \\"hi\\" }"}'  # braces and quotes inside strings


def call(name: str, arguments: str) -> tuple[str, str]:
    return name, arguments


CASES = [
    # Qwen2.5 / Qwen3: calls in <tool_call> blocks, text around them kept.
    (HermesToolCallParser(NAMES), f'<tool_call>\n{{"name": "get_weather", "arguments": {WEATHER}}}\n</tool_call>',
     "", [call("get_weather", WEATHER)]),
    (HermesToolCallParser(NAMES),
     f'Let me check.\n<tool_call>\n{{"name": "get_weather", "arguments": {WEATHER}}}\n</tool_call>\n'
     f'<tool_call>\n{{"name": "get_time", "arguments": {TIME}}}\n</tool_call>',
     "Let me check.\n\n", [call("get_weather", WEATHER), call("get_time", TIME)]),
    (HermesToolCallParser(NAMES), "Paris is sunny; no <tool_ call needed.", "Paris is sunny; no <tool_ call needed.", []),
    (HermesToolCallParser(NAMES), "<tool_call>not json</tool_call> after", "<tool_call>not json</tool_call> after", []),
    (HermesToolCallParser(NAMES), '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
     "", [call("get_weather", '{"city": "Par')]),  # cut off by max_tokens
    (HermesToolCallParser(NAMES), '<tool_call>{"name": "rm", "arguments": {}}</tool_call> then',
     '<tool_call>{"name": "rm", "arguments": {}}</tool_call> then', []),  # only a declared tool is called
    # Llama 3.1 JSON: the reply is the call; "parameters"; an optional <|python_tag|>; ';' between calls.
    (Llama3JsonToolCallParser(NAMES), f'{{"name": "get_weather", "parameters": {WEATHER}}}',
     "", [call("get_weather", WEATHER)]),
    (Llama3JsonToolCallParser(NAMES),
     f'<|python_tag|>{{"name": "get_weather", "parameters": {WEATHER}}}; {{"name": "get_time", "parameters": {TIME}}}',
     "", [call("get_weather", WEATHER), call("get_time", TIME)]),
    (Llama3JsonToolCallParser(NAMES), "It is sunny in {Paris}.", "It is sunny in {Paris}.", []),
    (Llama3JsonToolCallParser(NAMES), '{"city": "Paris"}', '{"city": "Paris"}', []),
    (Llama3JsonToolCallParser(NAMES), '{"name": "rm", "parameters": {}}', '{"name": "rm", "parameters": {}}', []),
    # GLM-4: the function's name on its own line, then the arguments.
    (Glm4ToolCallParser(NAMES), f"get_weather\n{WEATHER}", "", [call("get_weather", WEATHER)]),
    (Glm4ToolCallParser(NAMES), f"get_weather\n{WEATHER}\nget_time\n{TIME}",
     "", [call("get_weather", WEATHER), call("get_time", TIME)]),
    (Glm4ToolCallParser(NAMES), "\nget_weather is what I would call.\n{}", "\nget_weather is what I would call.\n{}", []),
    (Glm4ToolCallParser(NAMES), "get\n{}", "get\n{}", []),  # only a declared tool's name opens a call
    (Glm4ToolCallParser(NAMES), f"get_time\n{TIME}\nDone.", "\nDone.", [call("get_time", TIME)]),
    # parallel_tool_calls false under "auto": the model's later calls are dropped.
    (FirstCallOnly(HermesToolCallParser(NAMES)),
     f'<tool_call>\n{{"name": "get_weather", "arguments": {WEATHER}}}\n</tool_call>\n'
     f'<tool_call>\n{{"name": "get_time", "arguments": {TIME}}}\n</tool_call>',
     "", [call("get_weather", WEATHER)]),
    # Forced calls: a named function's arguments, or an array of calls.
    (NamedFunctionParser("get_weather"), WEATHER, "", [call("get_weather", WEATHER)]),
    (CallArrayParser(), f'[{{"name": "get_time", "arguments": {TIME}}}, {{"name": "get_weather", "arguments": {WEATHER}}}]',
     "", [call("get_time", TIME), call("get_weather", WEATHER)]),
]


@pytest.mark.parametrize("parser, text, content, calls", CASES)
def test_whole_replies_parse_into_content_and_calls(parser: ToolCallParser, text, content, calls):
    parsed = parser.parse(text, final=True)
    assert visible_content(parsed, final=True) == content
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    for _, arguments in calls:
        if arguments.endswith("}"):
            assert isinstance(json.loads(arguments), dict)
    assert [c.complete for c in parsed.calls] == [arguments.endswith("}") for _, arguments in calls]


@pytest.mark.parametrize("piece_size", [1, 3, 7])
@pytest.mark.parametrize("parser, text, content, calls", CASES)
def test_streamed_pieces_add_up_to_the_whole_parse(parser: ToolCallParser, text, content, calls, piece_size):
    stream = ToolCallStream(parser)
    streamed = ParsedOutput("")
    ids = []
    pieces = [text[i:i + piece_size] for i in range(0, len(text), piece_size)]
    for number, piece_text in enumerate(pieces):
        piece = stream.advance(piece_text, final=number == len(pieces) - 1)
        streamed.content += piece.content
        for call_piece in piece.calls:
            if call_piece.id is not None:  # a call's first piece: id and name, before any later piece of it
                assert call_piece.index == len(streamed.calls) and call_piece.name is not None
                ids.append(call_piece.id)
                streamed.calls.append(ToolCallText(call_piece.name, call_piece.arguments))
            else:
                assert call_piece.name is None
                streamed.calls[call_piece.index].arguments += call_piece.arguments
    assert streamed.content == content
    assert [(c.name, c.arguments) for c in streamed.calls] == calls
    assert len(set(ids)) == len(ids) and all(i.startswith("call_") for i in ids)
    assert stream.made_calls == bool(calls)


def test_text_that_may_open_a_call_is_held_back_until_it_is_known():
    stream = ToolCallStream(HermesToolCallParser(NAMES))
    assert stream.advance("Sure <tool_c", final=False).content == "Sure "
    assert stream.advance("all", final=False).content == ""
    assert stream.advance("s> then", final=True).content == "<tool_calls> then"
    glm = ToolCallStream(Glm4ToolCallParser(NAMES))
    assert glm.advance("get_w", final=False).content == ""
    assert glm.advance("ind", final=False).content == "get_wind"


@pytest.mark.parametrize("parallel_tool_calls, calls", [(None, 2), (True, 2), (False, 1)])
def test_auto_reads_only_the_first_call_when_calls_may_not_run_in_parallel(parallel_tool_calls, calls):
    request = ChatCompletionRequest.model_validate({
        "messages": [{"role": "user", "content": "Hi"}], "parallel_tool_calls": parallel_tool_calls,
        "tools": [{"type": "function", "function": {"name": name}} for name in NAMES]})
    parser = plan_tool_use(request, QWEN_TEMPLATE).new_parser()
    reply = "".join(f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>' for name in NAMES)
    assert len(parser.parse(reply, final=True).calls) == calls


def hermes_call(name: str, arguments: dict[str, object]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def llama3_call(name: str, arguments: dict[str, object]) -> str:
    return json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)


SEARCH = {"query": '北京 "today" <b>', "filters": FILTERS, "limit": 2}
WRITE = {"path": PATH, "content": CODE}
HERMES = [
    Transcript("text before a call", "Let me look that up.\n" + hermes_call("search", SEARCH),
               "Let me look that up.\n", [("search", SEARCH)]),
    Transcript("two calls, awkward strings",
               hermes_call("write_file", WRITE) + "\n" + hermes_call("get_weather", {"city": "Zürich", "days": 3}),
               "", [("write_file", WRITE), ("get_weather", {"city": "Zürich", "days": 3})]),
]
LLAMA3 = [
    Transcript("python tag, two calls",
               f'<|python_tag|>{llama3_call("get_weather", {"city": "Zürich"})}; {llama3_call("write_file", WRITE)}',
               "", [("get_weather", {"city": "Zürich"}), ("write_file", WRITE)]),
    Transcript("nested arguments, text after", llama3_call("search", SEARCH) + " I searched.", " I searched.",
               [("search", SEARCH)]),
]
JSON_CASES = ([pytest.param(key, t, id=f"{key} {t.id}") for key in ("hermes", "qwen3") for t in HERMES]
              + [pytest.param("llama3_json", t, id=f"llama3_json {t.id}") for t in LLAMA3])


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(t.text for t in HERMES + LLAMA3)


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("key, transcript", JSON_CASES)
def test_json_calls_stream_their_arguments_as_written(key, transcript, how, tokenizer):
    new_parser = tool_call_family_named(key).new_parser
    whole = new_parser(TOOLS).parse(transcript.text, final=True)
    assert visible_content(whole, final=True) == transcript.content
    assert [(c.name, json.loads(c.arguments)) for c in whole.calls] == transcript.calls
    assert all(c.complete for c in whole.calls)
    streamed = stream_calls(new_parser(TOOLS), split(transcript.text, how, tokenizer))
    assert streamed.content == transcript.content
    assert streamed.names == [c.name for c in whole.calls]
    assert streamed.arguments == [c.arguments for c in whole.calls]
    # Wherever the text stopped inside a call's arguments, the call's arguments so far are the text
    # written of them.
    spans = [(m.end(), json.JSONDecoder().raw_decode(transcript.text, m.end())[1])
             for m in re.finditer(r'"(?:arguments|parameters)": ', transcript.text)]
    for fed, arguments in streamed.seen:
        for index, (start, end) in enumerate(spans):
            if start < fed <= end:
                assert arguments[index] == transcript.text[start:fed]


def test_the_servers_parser_overrides_the_template_and_auto_may_be_switched_off():
    request = ChatCompletionRequest.model_validate({
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {"name": name}} for name in NAMES]})
    named = plan_tool_use(request, QWEN_TEMPLATE, tool_call_family_named("glm45"))
    assert named.parser == "glm45" and "<arg_key>" in named.markers and set(named.schemas) == set(NAMES)
    assert plan_tool_use(request, QWEN_TEMPLATE).parser == "hermes"
    with pytest.raises(APIError) as refused:
        plan_tool_use(request, QWEN_TEMPLATE, auto_enabled=False)
    assert refused.value.body.error.param == "tool_choice" and "enable_auto_tool_choice" in str(refused.value)
    forced = request.model_copy(update={"tool_choice": "required"})
    assert plan_tool_use(forced, QWEN_TEMPLATE, auto_enabled=False).constraint is not None
