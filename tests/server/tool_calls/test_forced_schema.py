"""The schemas that force a call, compiled by xgrammar: a tool's parameters keep their meaning once
placed inside the call array, local references included."""
from __future__ import annotations

import json

import pytest
import xgrammar
from xgrammar.testing import _is_grammar_accept_string as accepts

from autoglm.server.openai.protocol import ToolDefinition
from autoglm.server.tool_calls.forced_schema import call_array_schema, relocated

# What Pydantic writes for a function taking a nested model: the model under $defs, used by reference;
# "next" refers to the whole parameters object, recursively.
PARAMETERS = {
    "type": "object",
    "$defs": {"City": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}},
                       "required": ["name"], "additionalProperties": False}},
    "properties": {"city": {"$ref": "#/$defs/City"}, "next": {"$ref": "#"}},
    "required": ["city"],
    "additionalProperties": False,
}


def tool(name: str) -> ToolDefinition:
    return ToolDefinition.model_validate({"type": "function", "function": {"name": name, "parameters": PARAMETERS}})


@pytest.mark.parametrize("names", [["plan"], ["plan", "route"]], ids=["one tool", "two tools"])
def test_a_tools_local_references_resolve_inside_the_call_array(names):
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(call_array_schema([tool(n) for n in names], True)),
                                                any_whitespace=False)
    name = names[-1]
    assert accepts(grammar, f'[{{"name": "{name}", "arguments": {{"city": {{"name": "Paris"}}}}}}]')
    assert accepts(grammar, f'[{{"name": "{name}", "arguments": {{"city": {{"name": "Nice"}}, '
                            f'"next": {{"city": {{"name": "Lyon"}}}}}}}}]')
    assert not accepts(grammar, f'[{{"name": "{name}", "arguments": {{"city": {{"name": "Toulouse"}}}}}}]')
    assert not accepts(grammar, f'[{{"name": "{name}", "arguments": {{"city": "Paris"}}}}]')


def test_relocation_leaves_data_and_names_alone_and_the_original_untouched():
    schema = {"properties": {"default": {"$ref": "#/$defs/A"}, "kind": {"const": {"$ref": "#"}}},
              "enum": [{"$ref": "#"}], "$ref": "http://example.com/remote"}
    moved = relocated(schema, "#/items/properties/arguments")
    assert moved["properties"]["default"] == {"$ref": "#/items/properties/arguments/$defs/A"}  # a property's name
    assert moved["properties"]["kind"] == {"const": {"$ref": "#"}} and moved["enum"] == [{"$ref": "#"}]  # data
    assert moved["$ref"] == "http://example.com/remote"  # not a local reference
    assert schema["properties"]["default"] == {"$ref": "#/$defs/A"}
