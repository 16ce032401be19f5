"""The JSON schemas that force a call (tool_choice "required" or a named function), for the grammar."""
from __future__ import annotations

from typing import Any

from autoglm.server.openai.protocol import ToolDefinition

# OpenAI's meaning of a function declared without parameters: it takes none.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# Keywords whose values are data, not schemas: a "$ref" key inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
# Keywords whose values map names to schemas: their keys are names ("default" may name a property).
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})


def arguments_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The schema the named function's arguments object must match."""
    parameters = tool.function.parameters
    return NO_PARAMETERS if parameters is None else parameters


def call_array_schema(tools: list[ToolDefinition], parallel: bool) -> dict[str, Any]:
    """An array of {"name", "arguments"} objects, one of the tools each (name first, so a stream
    names the call before its arguments); exactly one call unless calls may run in parallel.

    Each tool's parameters move from the root of their own schema to a place inside this one, so
    their local references ("#", "#/$defs/...", as Pydantic writes nested models) are moved with them.
    """
    single = len(tools) == 1
    calls = []
    for index, tool in enumerate(tools):
        place = "#/items" if single else f"#/items/anyOf/{index}"
        calls.append({
            "type": "object",
            "properties": {"name": {"const": tool.function.name},
                           "arguments": relocated(arguments_schema(tool), f"{place}/properties/arguments")},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        })
    schema: dict[str, Any] = {"type": "array", "items": calls[0] if single else {"anyOf": calls}, "minItems": 1}
    if not parallel:
        schema["maxItems"] = 1
    return schema


def relocated(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    """A copy of `schema` to be placed at JSON pointer `pointer` of another schema: each local
    ``$ref`` ("#..."), which meant `schema`'s root, is prefixed with `pointer`. A loop, not
    recursion, so that a deeply nested schema cannot exhaust the stack."""
    root = dict(schema)
    pending: list[tuple[dict[str, Any] | list[Any], bool]] = [(root, False)]  # a node; whether its keys are names
    while pending:
        node, keys_are_names = pending.pop()
        entries = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for key, value in entries:
            is_keyword = isinstance(node, dict) and not keys_are_names
            if is_keyword and key in _DATA_KEYWORDS:
                continue
            if isinstance(value, (dict, list)):
                node[key] = copy = dict(value) if isinstance(value, dict) else list(value)
                pending.append((copy, is_keyword and key in _NAMED_SCHEMAS))
            elif is_keyword and key == "$ref" and isinstance(value, str) and value.startswith("#"):
                node[key] = pointer + value[1:]
    return root
