"""What a chat request's tools and tool_choice ask: the tools shown to the chat template, a grammar
forcing a call ("required" or a named function), and how calls are read out of the reply."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Any

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest, NamedToolChoice, ToolDefinition
from autoglm.server.tool_calls.families import ToolCallFamily, known_families, tool_call_family
from autoglm.server.tool_calls.forced import CallArrayParser, NamedFunctionParser
from autoglm.server.tool_calls.forced_schema import arguments_schema
from autoglm.server.tool_calls.parsed import FirstCallOnly, ToolCallParser
from autoglm.server.tool_calls.tool_schemas import calls_grammar
from autoglm.structured_outputs import StructuredOutputsParams


@dataclass(frozen=True)
class ToolUse:
    template_tools: list[dict[str, Any]]  # the tools as chat templates read them
    constraint: StructuredOutputsParams | None  # the grammar that forces a call; None when the model chooses
    new_parser: Callable[[], ToolCallParser] | None  # None: the reply is text, never read for calls
    # What a reply that made its calls ends with: OpenAI (and vLLM) answer "stop" when tool_choice
    # named the function, "tool_calls" otherwise.
    calls_finish_reason: str = "tool_calls"
    parser: str = ""  # the format calls are read in, by its parser's name ("" where a grammar wrote them)
    markers: tuple[str, ...] = ()  # the strings that format writes calls with
    schemas: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)  # each tool's parameters


def plan_tool_use(request: ChatCompletionRequest, chat_template: str | None, family: ToolCallFamily | None = None,
                  auto_enabled: bool = True) -> ToolUse | None:
    """The request's use of tools; None when it declares none.

    "none" shows the tools to the template and reads no calls; "auto" (the default with tools) reads
    calls in the format of `family` (the server's tool-call parser), else the one the template teaches
    (only the first with parallel_tool_calls false), unless the server turned "auto" off; "required" and a
    named function force a call with a grammar, which works with any model. Whatever the choice, the
    tools' parameters are checked apart (tool_schemas.py).
    """
    tools = request.tools or []
    choice = request.tool_choice
    if not tools:
        if choice in (None, "none", "auto"):
            return None
        raise APIError(HTTPStatus.BAD_REQUEST, "tool_choice asks for a tool call, but the request declares no "
                       "tools; declare them in 'tools'", param="tool_choice", code="invalid_value")
    names = [tool.function.name for tool in tools]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise APIError(HTTPStatus.BAD_REQUEST, f"tools declares the function {quote_value(repeated[0])} more than "
                       f"once; give each function a distinct name", param="tools", code="invalid_value")
    template_tools = [tool.model_dump(mode="json", exclude_none=True) for tool in tools]
    if choice == "none":
        return ToolUse(template_tools, None, None)
    if choice in (None, "auto"):
        if not auto_enabled:
            raise APIError(HTTPStatus.BAD_REQUEST, "this server does not let the model choose its calls "
                           "(enable_auto_tool_choice is off); use tool_choice 'required', 'none' or name a function",
                           param="tool_choice", code="invalid_value")
        family = family or tool_call_family(chat_template)
        if family is None:
            raise APIError(HTTPStatus.BAD_REQUEST, f"tool_choice 'auto' reads calls in the format the model's "
                           f"chat template teaches, and this model's teaches none this server reads "
                           f"({known_families()}); use tool_choice 'required' or name a function",
                           param="tool_choice", code="invalid_value")
        schemas = {tool.function.name: tool.function.parameters for tool in tools}
        parser_of_request = family.new_parser
        new_parser: Callable[[], ToolCallParser] = (
            partial(parser_of_request, schemas) if request.allows_parallel_calls
            else lambda: FirstCallOnly(parser_of_request(schemas)))
        return ToolUse(template_tools, None, new_parser, parser=family.key, markers=family.markers, schemas=schemas)
    if choice == "required":
        return ToolUse(template_tools, calls_grammar(tools, request.allows_parallel_calls), CallArrayParser)
    tool = _named_tool(tools, choice)
    return ToolUse(template_tools, StructuredOutputsParams(json=arguments_schema(tool)),
                   partial(NamedFunctionParser, tool.function.name), calls_finish_reason="stop")


def _named_tool(tools: list[ToolDefinition], choice: NamedToolChoice) -> ToolDefinition:
    name = choice.function.name
    tool = next((tool for tool in tools if tool.function.name == name), None)
    if tool is None:
        declared = ", ".join(quote_value(tool.function.name) for tool in tools)
        raise APIError(HTTPStatus.BAD_REQUEST, f"tool_choice names the function {quote_value(name)}, which tools "
                       f"does not declare; declared: {declared}", param="tool_choice", code="invalid_value")
    return tool
