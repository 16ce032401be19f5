"""A call's arguments checked against its tool's parameters: an object the schema accepts, and no
verdict against them where the schema itself cannot be used."""
from __future__ import annotations

import pytest

from autoglm.server.tool_calls.argument_check import arguments_match

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"]}


@pytest.mark.parametrize("arguments, schema, matches", [
    ('{"city": "Zürich", "days": 3}', WEATHER, True),
    ('{"city": "Zürich", "days": "3"}', WEATHER, False),  # a value of the wrong type
    ('{"days": 3}', WEATHER, False),  # a required key missing
    ('{"city": "Zür', WEATHER, False),  # not JSON: cut off
    ('["Zürich"]', WEATHER, False),  # JSON, but no object
    ('["Zürich"]', None, False),
    ('{"anything": [1, {"at": "all"}]}', None, True),  # no parameters declared: any object
    ("[" * 100_000, None, False),  # nested past what the JSON reader takes
])
def test_arguments_match_when_they_are_an_object_the_schema_accepts(arguments, schema, matches):
    assert arguments_match(arguments, schema) is matches


@pytest.mark.parametrize("schema", [
    {"type": "objekt"},  # no JSON type
    {"properties": {"city": {"$ref": "#/$defs/missing"}}},  # a reference to nothing
    {"properties": {"city": {"pattern": "(unclosed"}}},  # a pattern no regular expression
    {"$schema": "https://example.com/unknown-draft", "type": "object"},  # a draft jsonschema does not know
])
def test_a_schema_that_cannot_be_used_says_nothing_against_the_arguments(schema):
    assert arguments_match('{"city": "Zürich"}', schema) is True
