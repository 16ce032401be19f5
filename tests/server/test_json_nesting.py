"""The nesting bound judged on a body's bytes: brackets inside strings do not count, any encoding
json.loads reads is read alike, and the param names the top-level field only when it is one."""
from __future__ import annotations

import json

import pytest

from autoglm.server.http.json_nesting import MAX_JSON_DEPTH, nesting_error


def nested(levels: int) -> str:
    """JSON text of `levels` arrays inside one another."""
    return "[" * levels + "]" * levels


def member(key: str, levels: int) -> str:
    """A body whose `key` holds arrays nested so that the body as a whole is `levels` deep."""
    return f'{{"model": "x", {json.dumps(key)}: {nested(levels - 1)}}}'


def test_a_body_at_the_limit_passes_and_one_level_more_is_named_by_its_field():
    assert nesting_error(member("messages", MAX_JSON_DEPTH).encode()) is None
    error = nesting_error(member("messages", MAX_JSON_DEPTH + 1).encode())
    assert error is not None and error.status == 400
    assert (error.body.error.param, error.body.error.code) == ("messages", "request_too_deep")
    assert f"more than {MAX_JSON_DEPTH} levels deep (in 'messages')" in error.body.error.message


def test_objects_count_as_arrays_do_and_any_depth_is_refused_at_once():
    body = '{"a":' * 100_000 + "1" + "}" * 100_000
    assert nesting_error(body.encode()).body.error.param == "a"


@pytest.mark.parametrize("body, param", [
    (nested(MAX_JSON_DEPTH + 1), None),  # not an object: no field to name
    (member("no such field!", MAX_JSON_DEPTH + 1), None),  # not a field name: never echoed as the param
    ('{"model": "[[[[", "tools": ' + nested(MAX_JSON_DEPTH) + "}", "tools"),  # brackets in strings do not count
    ('{"stop": ["a\\"]", "b"], "prompt": ' + nested(MAX_JSON_DEPTH) + "}", "prompt"),  # nor escaped quotes
])
def test_the_param_is_the_top_level_field_the_nesting_is_under(body, param):
    assert nesting_error(body.encode()).body.error.param == param


@pytest.mark.parametrize("body", [
    json.dumps({"prompt": "[" * (10 * MAX_JSON_DEPTH)}),  # brackets only inside a string
    json.dumps({"prompt": [[1, 2]] * (10 * MAX_JSON_DEPTH)}),  # many arrays, none deep
    '{"prompt": "' + nested(MAX_JSON_DEPTH + 1),  # an unterminated string: not JSON, for the parser to say
    "",
])
def test_bodies_that_do_not_nest_too_deep_are_left_to_the_parser(body):
    assert nesting_error(body.encode()) is None


def test_utf16_bodies_are_read_as_json_reads_them():
    deep = member("messages", MAX_JSON_DEPTH + 1)
    assert nesting_error(deep.encode("utf-16")).body.error.param == "messages"
    # U+5B5B is the bytes '[[' in UTF-16: characters are not brackets.
    text = json.dumps({"prompt": "\u5b5b" * (2 * MAX_JSON_DEPTH)}, ensure_ascii=False)
    assert nesting_error(text.encode("utf-16-le")) is None
