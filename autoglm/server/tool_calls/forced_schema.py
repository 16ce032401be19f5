"""The JSON schemas that force a call (tool_choice "required" or a named function), for the grammar."""
from __future__ import annotations

from typing import Any

from autoglm.server.protocol import ToolDefinition

# OpenAI's meaning of a function declared without parameters: it takes none.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def arguments_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The schema the named function's arguments object must match."""
    parameters = tool.function.parameters
    return NO_PARAMETERS if parameters is None else parameters


def call_array_schema(tools: list[ToolDefinition], parallel: bool) -> dict[str, Any]:
    """An array of {"name", "arguments"} objects, one of the tools each (name first, so a stream
    names the call before its arguments); exactly one call unless calls may run in parallel."""
    calls = [{
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": arguments_schema(tool)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for tool in tools]
    schema: dict[str, Any] = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls},
                              "minItems": 1}
    if not parallel:
        schema["maxItems"] = 1
    return schema
