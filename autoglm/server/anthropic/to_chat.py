"""A Messages request as the chat request it amounts to, so that everything the chat route does (tenants, limits,
images, tools, structured output, thinking controls, the response cache) serves it as well.

The system prompt becomes the first message; a user turn's tool_result blocks become tool messages where they
stand, between user messages holding its text and images; an assistant turn's tool_use blocks become its
tool_calls and its thinking blocks its reasoning; an assistant turn last is continued (Anthropic's prefill).
"""
from __future__ import annotations

import json
from typing import Any

from autoglm.server.anthropic.protocol import (
    CountTokensRequest,
    ImageBlock,
    Message,
    MessagesPrompt,
    MessagesRequest,
    TextBlock,
    Thinking,
    ThinkingDisabled,
    ThinkingBlock,
    ThinkingEnabled,
    ToolChoice,
    ToolChoiceAny,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolResultBlock,
    ToolUseBlock,
)
from autoglm.server.openai.protocol import ChatCompletionRequest

# The name a chat request's json_schema format needs, which Anthropic's output format lacks.
_OUTPUT_FORMAT_NAME = "output"


def chat_request(request: MessagesRequest) -> ChatCompletionRequest:
    fields = _prompt_fields(request)
    fields.update(max_tokens=request.max_tokens, stream=request.stream)
    if request.stop_sequences:
        fields["stop"] = request.stop_sequences
    for name in ("temperature", "top_p", "top_k"):
        if getattr(request, name) is not None:
            fields[name] = getattr(request, name)
    if request.metadata is not None and request.metadata.user_id is not None:
        fields["user"] = request.metadata.user_id
    output_format = request.output_config.format if request.output_config is not None else None
    if output_format is not None:
        fields["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": _OUTPUT_FORMAT_NAME, "schema": output_format.schema_}}
    return ChatCompletionRequest.model_validate(fields)


def counting_request(request: CountTokensRequest) -> ChatCompletionRequest:
    """The chat request whose prompt a count_tokens request counts."""
    return ChatCompletionRequest.model_validate(_prompt_fields(request))


def _prompt_fields(prompt: MessagesPrompt) -> dict[str, Any]:
    """The chat fields that set the prompt: messages, tools (and the choice among them) and thinking."""
    system = [_text_part(block) for block in prompt.system or []]
    messages = [{"role": "system", "content": system}] if system else []
    for message in prompt.messages:
        messages.extend(_chat_messages(message))
    fields: dict[str, Any] = {"model": prompt.model, "messages": messages}
    if prompt.messages[-1].role == "assistant":
        fields.update(continue_final_message=True, add_generation_prompt=False)
    if prompt.tools is not None:
        fields["tools"] = [{"type": "function", "function": {
            "name": tool.name, "description": tool.description, "parameters": tool.input_schema}}
            for tool in prompt.tools]
    if prompt.tool_choice is not None:
        fields.update(_tool_choice_fields(prompt.tool_choice))
    if prompt.thinking is not None:
        fields.update(_thinking_fields(prompt.thinking))
    return fields


def _chat_messages(message: Message) -> list[dict[str, Any]]:
    if message.role == "assistant":
        return [_assistant_message(message)]
    messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            if parts:
                messages.append({"role": "user", "content": parts})
                parts = []
            messages.append({"role": "tool", "tool_call_id": block.tool_use_id,
                             "content": [_text_part(text) for text in block.content]})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": block.source.url}})
        else:
            parts.append(_text_part(block))
    if parts or not messages:
        messages.append({"role": "user", "content": parts})
    return messages


def _assistant_message(message: Message) -> dict[str, Any]:
    """Text blocks as the content, tool_use blocks as the calls, thinking blocks as the reasoning (redacted
    thinking, which no model here reads, dropped)."""
    texts = [_text_part(block) for block in message.content if isinstance(block, TextBlock)]
    thinking = [block.thinking for block in message.content if isinstance(block, ThinkingBlock)]
    calls = [{"id": block.id, "type": "function",
              "function": {"name": block.name, "arguments": json.dumps(block.input)}}
             for block in message.content if isinstance(block, ToolUseBlock)]
    turn: dict[str, Any] = {"role": "assistant", "content": texts or None}
    if calls:
        turn["tool_calls"] = calls
    if thinking:
        turn["reasoning_content"] = "\n".join(thinking)
    return turn


def _text_part(block: TextBlock) -> dict[str, Any]:
    return {"type": "text", "text": block.text}


def _tool_choice_fields(choice: ToolChoice) -> dict[str, Any]:
    """"any" is chat's "required", a named tool chat's named function; "none" shows the tools and reads no call."""
    if isinstance(choice, ToolChoiceNone):
        return {"tool_choice": "none"}
    if isinstance(choice, ToolChoiceTool):
        return {"tool_choice": {"type": "function", "function": {"name": choice.name}}}
    fields: dict[str, Any] = {"tool_choice": "required" if isinstance(choice, ToolChoiceAny) else "auto"}
    if choice.disable_parallel_tool_use:
        fields["parallel_tool_calls"] = False
    return fields


def _thinking_fields(thinking: Thinking) -> dict[str, Any]:
    """Thinking on or off through the chat template's enable_thinking (which GLM's, Qwen's and others' read), a
    budget through thinking_token_budget, and ``display: "omitted"`` as include_reasoning false."""
    if isinstance(thinking, ThinkingDisabled):
        return {"chat_template_kwargs": {"enable_thinking": False}}
    fields: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": True},
                              "include_reasoning": thinking.display != "omitted"}
    if isinstance(thinking, ThinkingEnabled):
        fields["thinking_token_budget"] = thinking.budget_tokens
    return fields
