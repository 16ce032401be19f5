"""Every tool's parameters checked as a forced call compiles them, whatever tool_choice asks.

OpenAI refuses a tool whose parameters are not a schema it can enforce even when the model may
answer in text; so does this server, by compiling the grammar tool_choice "required" uses: one
grammar for all the tools, compiled off the event loop into the engine's grammar cache, where a
later forced call finds it. That costs what a forced call costs, and far less than compiling each
tool's schema alone (xgrammar shares the work across one grammar). Only when it fails are parts of
the tools compiled, halving them, to name the one at fault.
"""
from __future__ import annotations

from autoglm.engine.client import EngineClient
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.output_constraints import OutputConstraint, compile_grammar
from autoglm.server.openai.protocol import ChatCompletionRequest, ToolDefinition
from autoglm.server.tool_calls.forced_schema import arguments_schema, call_array_schema
from autoglm.structured_outputs import StructuredOutputsParams


def calls_grammar(tools: list[ToolDefinition], parallel: bool) -> StructuredOutputsParams:
    """tool_choice "required"'s constraint: an array of calls to `tools`, one call unless `parallel`."""
    return StructuredOutputsParams(json=call_array_schema(tools, parallel))


async def check_tool_schemas(engine: EngineClient, request: ChatCompletionRequest) -> None:
    """Refuse the request's tools unless every one's parameters compile: a 400 naming
    ``tools[i].function.parameters`` for the first that does not, with the reason the checks give."""
    tools = request.tools or []
    if not tools:
        return
    try:
        await compile_grammar(engine, OutputConstraint(calls_grammar(tools, request.allows_parallel_calls), "tools"))
    except APIError:
        culprit = await _first_failing_tool(engine, tools)
        field = f"tools[{culprit}].function.parameters"
        await compile_grammar(engine, OutputConstraint.from_request_field(field, json=arguments_schema(tools[culprit])))
        raise  # the culprit compiles alone (only placed among the others is it too deep): the whole set's error


async def _first_failing_tool(engine: EngineClient, tools: list[ToolDefinition]) -> int:
    """The index of the first tool without which the calls' grammar would compile, `tools` as a whole
    known not to: found by compiling halves, a few grammars where one per tool would be many."""
    compiles, fails = 0, len(tools)  # tools[:compiles] compile together, tools[:fails] do not
    while fails - compiles > 1:
        middle = (compiles + fails) // 2
        try:
            await compile_grammar(engine, OutputConstraint(calls_grammar(tools[:middle], parallel=True), "tools"))
            compiles = middle
        except APIError:
            fails = middle
    return fails - 1
