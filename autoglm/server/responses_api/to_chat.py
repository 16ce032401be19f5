"""A Responses request, after the conversation of its stored predecessors, as the chat request that serves it.

Each answer's items (its thinking, its text, its calls) become one assistant message, the calls' outputs
tool messages, the instructions a system message first. A developer message is a system message: chat
templates of open models know no developer role. Everything else the chat route does (tenants, limits,
the response cache, images, tools and their grammars, structured output, thinking) then applies as is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import (
    AnyPart,
    ChatCompletionRequest,
    ChatMessage,
    FunctionCallInput,
    FunctionDefinition,
    FunctionName,
    ImageContentPart,
    ImageURL,
    JSONSchemaFormat,
    NamedToolChoice,
    ResponseFormat,
    TextContentPart,
    ToolCallInput,
    ToolDefinition,
)
from autoglm.server.responses_api.effort import thinking_controls
from autoglm.server.responses_api.protocol import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionChoice,
    FunctionTool,
    InputImage,
    InputItem,
    InputText,
    MessageItem,
    OutputText,
    ReasoningItem,
    ResponsesRequest,
    TextConfig,
)


@dataclass(frozen=True)
class ChatTranslation:
    request: ChatCompletionRequest
    # Where each chat message's content stands in the Responses request, by the message's index
    # ("input[2].content"), for the errors that name a part; absent for messages of stored responses.
    content_paths: dict[int, str]


def chat_request(body: ResponsesRequest, history: list[InputItem], reads_thinking: bool) -> ChatTranslation:
    """The chat request for `body` continuing `history` (its predecessors' items, oldest first);
    `reads_thinking`: whether the server reads the model's thinking, and so can budget it."""
    turns = _Turns()
    if body.instructions is not None:
        turns.add_message(ChatMessage(role="system", content=body.instructions), "instructions")
    _add_items(turns, [*history, *body.input], len(history))
    thinking = thinking_controls(body.reasoning.effort if body.reasoning is not None else None,
                                 body.max_output_tokens, reads_thinking)
    request = ChatCompletionRequest(
        model=body.model,
        messages=turns.finished(),
        max_completion_tokens=body.max_output_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        stream=body.streams,
        user=body.user,
        tools=[_chat_tool(tool) for tool in body.tools or [] if isinstance(tool, FunctionTool)] or None,
        tool_choice=(NamedToolChoice(type="function", function=FunctionName(name=body.tool_choice.name))
                     if isinstance(body.tool_choice, FunctionChoice) else body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls,
        response_format=_response_format(body.text),
        chat_template_kwargs=thinking.template_kwargs,
        thinking_token_budget=thinking.token_budget,
    )
    return ChatTranslation(request, turns.content_paths)


def _add_items(turns: _Turns, items: list[InputItem], num_history_items: int) -> None:
    """The conversation's items as chat messages; the first `num_history_items` came from stored responses,
    the rest from the request's input, whose errors name them (``input[2].call_id``)."""
    for index, item in enumerate(items):
        own = index - num_history_items  # the item's index in the input; negative for a stored one
        if isinstance(item, ReasoningItem):
            turns.add_thinking(item.text)
        elif isinstance(item, MessageItem) and item.role == "assistant":
            turns.add_text("".join(part.text for part in item.content if isinstance(part, (InputText, OutputText))))
        elif isinstance(item, FunctionCallItem):
            turns.add_call(ToolCallInput(id=item.call_id, type="function",
                                         function=FunctionCallInput(name=item.name, arguments=item.arguments)))
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in turns.call_ids:
                raise APIError(HTTPStatus.BAD_REQUEST, f"input[{own}] is the output of call "
                               f"{quote_value(item.call_id)}, which no earlier function_call item made (in the input, "
                               f"or in the conversation of previous_response_id)",
                               param=f"input[{own}].call_id", code="invalid_value")
            output = item.output if isinstance(item.output, str) else _chat_parts(item.output)
            turns.add_message(ChatMessage(role="tool", tool_call_id=item.call_id, content=output),
                              f"input[{own}].output" if own >= 0 else None)
        elif isinstance(item, MessageItem):
            role = "system" if item.role == "developer" else item.role
            turns.add_message(ChatMessage(role=role, content=_chat_parts(item.content)),
                              f"input[{own}].content" if own >= 0 else None)


@dataclass
class _AnswerTurn:
    thinking: str | None = None
    text: str | None = None
    calls: list[ToolCallInput] = field(default_factory=list)

    def message(self) -> ChatMessage:
        return ChatMessage(role="assistant", content=self.text, tool_calls=self.calls or None,
                           reasoning_content=self.thinking)


class _Turns:
    """Chat messages as items arrive: an answer's thinking, text and calls, in that order, join one assistant
    message; anything else, or an answer's part out of that order, starts the next."""

    def __init__(self) -> None:
        self._messages: list[ChatMessage] = []
        self._answer: _AnswerTurn | None = None
        self.call_ids: set[str] = set()
        self.content_paths: dict[int, str] = {}

    def add_thinking(self, text: str) -> None:
        answer = self._answer
        if answer is None or answer.thinking is not None or answer.text is not None or answer.calls:
            answer = self._next_answer()
        answer.thinking = text

    def add_text(self, text: str) -> None:
        answer = self._answer
        if answer is None or answer.text is not None or answer.calls:
            answer = self._next_answer()
        answer.text = text

    def add_call(self, call: ToolCallInput) -> None:
        answer = self._answer or self._next_answer()
        answer.calls.append(call)
        self.call_ids.add(call.id)

    def add_message(self, message: ChatMessage, content_path: str | None) -> None:
        self._close_answer()
        if content_path is not None:
            self.content_paths[len(self._messages)] = content_path
        self._messages.append(message)

    def finished(self) -> list[ChatMessage]:
        self._close_answer()
        return self._messages

    def _next_answer(self) -> _AnswerTurn:
        self._close_answer()
        self._answer = _AnswerTurn()
        return self._answer

    def _close_answer(self) -> None:
        if self._answer is not None:
            self._messages.append(self._answer.message())
            self._answer = None


def _chat_parts(parts: list[ContentPart]) -> list[AnyPart]:
    """Text and image parts as chat's; refusals, which are not rendered, left out."""
    chat_parts: list[AnyPart] = []
    for part in parts:
        if isinstance(part, (InputText, OutputText)):
            chat_parts.append(TextContentPart(type="text", text=part.text))
        elif isinstance(part, InputImage) and part.image_url is not None:
            chat_parts.append(ImageContentPart(type="image_url",
                                               image_url=ImageURL(url=part.image_url, detail=part.detail)))
    return chat_parts


def _chat_tool(tool: FunctionTool) -> ToolDefinition:
    return ToolDefinition(type="function", function=FunctionDefinition(
        name=tool.name, description=tool.description, parameters=tool.parameters, strict=tool.strict))


def _response_format(text: TextConfig | None) -> ResponseFormat | None:
    text_format = text.format if text is not None else None
    if text_format is None or text_format.type == "text":
        return None
    if text_format.type == "json_object":
        return ResponseFormat(type="json_object")
    return ResponseFormat(type="json_schema", json_schema=JSONSchemaFormat(
        name=text_format.name, description=text_format.description, schema=text_format.schema_,
        strict=text_format.strict))
