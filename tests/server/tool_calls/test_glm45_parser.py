"""GLM-4.5/4.6 and GLM-4.7 calls, whole and streamed however the text is cut: each value takes the
type its tool's schema gives it, and a string value streams before its closing tag is written."""
from __future__ import annotations

import json
import re

import pytest

from autoglm.server.tool_calls.glm45 import Glm45ToolCallParser, Glm47ToolCallParser
from autoglm.server.tool_calls.stream import ToolCallStream, visible_content
from tests.server.tool_calls.replies import CODE, FILTERS, PATH, TOOLS, Transcript
from tests.server.tool_calls.streaming import SPLITS, split, stream_calls, train_tokenizer

VALUE_CLOSE = "</arg_value>"


def glm45_call(name: str, **arguments: str) -> str:
    """A call as GLM-4.5 writes it: the name and each tag on a line of its own."""
    lines = "".join(f"\n<arg_key>{key}</arg_key>\n<arg_value>{value}</arg_value>" for key, value in arguments.items())
    return f"<tool_call>{name}{lines}\n</tool_call>"


def glm47_call(name: str, **arguments: str) -> str:
    """A call as GLM-4.7 writes it: all on one line, and <tool_call>NAME</tool_call> without arguments."""
    tags = "".join(f"<arg_key>{key}</arg_key><arg_value>{value}</arg_value>" for key, value in arguments.items())
    return f"<tool_call>{name}{tags}</tool_call>"


GLM45 = [
    Transcript("text before a call", "Let me check the weather in Zürich.\n"
               + glm45_call("get_weather", city="Zürich", days="3", detailed="true"),
               "Let me check the weather in Zürich.\n",
               [("get_weather", {"city": "Zürich", "days": 3, "detailed": True})]),
    Transcript("two calls, nested JSON", glm45_call("search", query='北京 "today" <b>', filters=json.dumps(FILTERS),
                                                    tags='["a", "b"]', limit="2.5")
               + "\n" + glm45_call("get_weather", city="北京"),
               "", [("search", {"query": '北京 "today" <b>', "filters": FILTERS, "tags": ["a", "b"], "limit": 2.5}),
                    ("get_weather", {"city": "北京"})]),
    Transcript("awkward strings, text after", "I will save it.\n" + glm45_call("write_file", path=PATH, content=CODE)
               + "\nDone.", "I will save it.\n\nDone.", [("write_file", {"path": PATH, "content": CODE})]),
    Transcript("no schema, a union and a fallback",
               glm45_call("get_time", zone="UTC+1", offset="2", flags='{"dst": false}')
               + glm45_call("get_weather", city="", days="three", units="null"),
               "", [("get_time", {"zone": "UTC+1", "offset": 2, "flags": {"dst": False}}),
                    ("get_weather", {"city": "", "days": "three", "units": None})]),
]
GLM47 = [
    Transcript("name on the argument's line", glm47_call("get_weather", city="Zürich", days="2"),
               "", [("get_weather", {"city": "Zürich", "days": 2})]),
    Transcript("a call without arguments, then another", "Checking the time first."
               + glm47_call("get_time") + glm47_call("write_file", path="北京.txt", content=CODE),
               "Checking the time first.", [("get_time", {}), ("write_file", {"path": "北京.txt", "content": CODE})]),
    Transcript("nested JSON, whitespace between tags",
               "<tool_call>search\n<arg_key> query </arg_key>  \n<arg_value>a\\b</arg_value>\n\n"
               f"<arg_key>filters</arg_key><arg_value>\n{json.dumps(FILTERS, indent=1)}\n</arg_value>\n</tool_call>",
               "", [("search", {"query": "a\\b", "filters": FILTERS})]),
    Transcript("GLM-4.5's layout", glm45_call("get_weather", city="Zürich"),
               "", [("get_weather", {"city": "Zürich"})]),
]
CASES = ([pytest.param(Glm45ToolCallParser, t, id=f"4.5 {t.id}") for t in GLM45]
         + [pytest.param(Glm47ToolCallParser, t, id=f"4.7 {t.id}") for t in GLM47])


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(t.text for t in GLM45 + GLM47)


@pytest.mark.parametrize("parser_class, transcript", CASES)
def test_a_whole_reply_parses_into_its_calls_with_the_schemas_types(parser_class, transcript):
    parsed = parser_class(TOOLS).parse(transcript.text, final=True)
    assert visible_content(parsed, final=True) == transcript.content
    assert [(call.name, json.loads(call.arguments)) for call in parsed.calls] == transcript.calls
    # In the order written, in json.dumps' own layout.
    assert [call.arguments for call in parsed.calls] == [json.dumps(a, ensure_ascii=False) for _, a in transcript.calls]
    assert all(call.complete for call in parsed.calls)


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("parser_class, transcript", CASES)
def test_a_streamed_reply_adds_up_to_the_whole_and_sends_strings_as_they_come(parser_class, transcript, how, tokenizer):
    whole = parser_class(TOOLS).parse(transcript.text, final=True)
    streamed = stream_calls(parser_class(TOOLS), split(transcript.text, how, tokenizer))
    assert streamed.content == visible_content(whole, final=True)
    assert streamed.names == [call.name for call in whole.calls]
    assert streamed.arguments == [call.arguments for call in whole.calls]
    # Wherever the text stopped inside a string value, the call's arguments so far end with as much of
    # it as cannot be the start of its closing tag.
    for fed, arguments in streamed.seen:
        for index, key, start, close in string_values(transcript):
            if start <= fed <= close:
                shown = transcript.text[start:fed]
                shown = shown[:len(shown) - closing_tag_start(shown)]
                assert arguments[index].endswith(json.dumps(key) + ": " + json.dumps(shown, ensure_ascii=False)[:-1])


def string_values(transcript: Transcript) -> list[tuple[int, str, int, int]]:
    """(call index, key, where the value starts, where its closing tag starts) of each value whose
    schema type is "string"."""
    values = []
    for index, block in enumerate(re.finditer(r"<tool_call>.*?</tool_call>", transcript.text, re.S)):
        schema = TOOLS[transcript.calls[index][0]] or {}
        for argument in re.finditer(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", block[0], re.S):
            key = argument[1].strip()
            if schema.get("properties", {}).get(key, {}).get("type") == "string":
                values.append((index, key, block.start() + argument.start(2), block.start() + argument.end(2)))
    return values


def closing_tag_start(text: str) -> int:
    """How many characters at the end of `text` begin the closing tag."""
    return next((n for n in range(len(VALUE_CLOSE) - 1, 0, -1) if text.endswith(VALUE_CLOSE[:n])), 0)


def test_a_string_value_goes_out_before_its_closing_tag_is_written():
    stream = ToolCallStream(Glm45ToolCallParser(TOOLS))
    first = stream.advance("<tool_call>write_file\n", final=False).calls
    assert [(c.name, c.arguments) for c in first] == [("write_file", "")]  # the call exists once named
    assert stream.advance("<arg_key>content</arg_key>", final=False).calls[0].arguments == '{"content": '
    assert stream.advance('\n<arg_value>say "hi"\n</arg', final=False).calls[0].arguments == '"say \\"hi\\"\\n'
    assert stream.advance("x", final=False).calls[0].arguments == "</argx"
    assert stream.advance("</arg_value>\n</tool_call>", final=True).calls[0].arguments == '"}'


def test_a_non_string_value_waits_for_its_closing_tag():
    parser = Glm45ToolCallParser(TOOLS)
    assert parser.parse("<tool_call>search\n<arg_key>filters</arg_key>\n<arg_value>{\"a\": ", final=False).calls[
        0].arguments == '{"filters": '


@pytest.mark.parametrize("parser_class", [Glm45ToolCallParser, Glm47ToolCallParser])
@pytest.mark.parametrize("text", [
    glm45_call("delete_all", path="/") + "\nNothing to call.",
    "<tool_call>get_weathe\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
    "No tool: <tool_call> is how calls start.",
    "<tool_call>",
], ids=["undeclared", "a declared name's prefix", "a marker in prose", "a lone marker"])
def test_a_block_naming_no_declared_tool_stays_content(parser_class, text, tokenizer):
    parsed = parser_class(TOOLS).parse(text, final=True)
    assert (parsed.content, parsed.calls) == (text, [])
    for how in SPLITS:
        streamed = stream_calls(parser_class(TOOLS), split(text, how, tokenizer))
        assert (streamed.content, streamed.names) == (text, [])


def test_a_declared_call_after_an_undeclared_block_is_read():
    text = glm45_call("delete_all", path="/") + "\n" + glm45_call("get_weather", city="Nice")
    parsed = Glm45ToolCallParser(TOOLS).parse(text, final=True)
    assert parsed.content == glm45_call("delete_all", path="/") + "\n"
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", '{"city": "Nice"}')]


@pytest.mark.parametrize("parser_class", [Glm45ToolCallParser, Glm47ToolCallParser])
@pytest.mark.parametrize("text, arguments", [
    ("<tool_call>get_weather", ""),
    ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zür", '{"city": "Zür'),
    ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Nice</arg_value>\n<arg_key>days</arg_key>\n"
     "<arg_value>4", '{"city": "Nice", "days": '),
], ids=["named", "in a string", "in a number"])
def test_a_call_cut_off_is_reported_as_far_as_it_went_and_incomplete(parser_class, text, arguments, tokenizer):
    parsed = parser_class(TOOLS).parse(text, final=True)
    assert [(c.name, c.arguments, c.complete) for c in parsed.calls] == [("get_weather", arguments, False)]
    streamed = stream_calls(parser_class(TOOLS), split(text, "characters", tokenizer))
    assert (streamed.names, streamed.arguments) == (["get_weather"], [arguments])


@pytest.mark.parametrize("parser_class", [Glm45ToolCallParser, Glm47ToolCallParser])
def test_a_name_may_share_its_line_with_the_first_key(parser_class):
    text = "<tool_call>get_weather <arg_key>city</arg_key> <arg_value>Nice</arg_value> </tool_call>"
    assert parser_class(TOOLS).parse(text, final=True).calls[0].arguments == '{"city": "Nice"}'


def test_only_glm47_closes_a_call_straight_after_its_name():
    text = glm47_call("get_time")
    assert Glm45ToolCallParser(TOOLS).parse(text, final=True).content == text
    assert Glm45ToolCallParser(TOOLS).parse(glm45_call("get_time"), final=True).calls[0].arguments == "{}"
    assert Glm47ToolCallParser(TOOLS).parse(text, final=True).calls[0].arguments == "{}"


@pytest.mark.parametrize("parser_class", [Glm45ToolCallParser, Glm47ToolCallParser])
def test_a_key_without_a_value_gets_an_empty_one(parser_class):
    text = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n"
            "<arg_key>days</arg_key><arg_value>1</arg_value></tool_call>")
    assert parser_class(TOOLS).parse(text, final=True).calls[0].arguments == '{"city": "", "days": 1}'


@pytest.mark.parametrize("written, value", [("NaN", "NaN"), ("-Infinity", "-Infinity"), ("[1, 2", "[1, 2"),
                                            ('"quoted"', "quoted"), ("1e3", 1000.0)])
def test_a_value_that_reads_as_no_json_stays_text(written, value):
    parsed = Glm45ToolCallParser(TOOLS).parse(glm45_call("get_time", value=written), final=True)
    assert json.loads(parsed.calls[0].arguments) == {"value": value}
