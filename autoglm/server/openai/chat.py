"""POST /v1/chat/completions: messages rendered with the model's chat template, a reply out."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request, Response
from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from autoglm.engine.tokenize import PromptCharLimit, TokenizedPrompt, encode_text
from autoglm.errors import quote_value
from autoglm.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from autoglm.server.dependencies import State
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.logprobs import chat_logprobs, token_decoder
from autoglm.server.openai.output_constraints import OutputConstraint, compile_grammar, requested_constraint
from autoglm.server.openai.protocol import ChatCompletionRequest, ChatMessage
from autoglm.server.openai.responses import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatLogprobs,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    FunctionCall,
    ToolCall,
    UsageInfo,
)
from autoglm.server.openai.sampling import chat_sampling_params
from autoglm.server.openai.generation import accept_generation, response_cache_lookup, serve_generation
from autoglm.server.state import ServerState
from autoglm.server.tenants.max_tokens_cap import capped_max_tokens
from autoglm.server.tenants.request_budget import admit_generation
from autoglm.server.openai.streaming import ChoiceDelta
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.tool_calls.families import tool_call_family
from autoglm.server.tool_calls.parsed import new_tool_call_id
from autoglm.server.tool_calls.stream import StreamPiece, ToolCallStream, visible_content
from autoglm.server.tool_calls.tool_schemas import check_tool_schemas
from autoglm.server.tool_calls.tool_use import ToolUse, plan_tool_use
from autoglm.server.openai.unsupported import refuse_unimplemented


# Names a request's chat_template_kwargs may not set: apply_chat_template's own arguments (the request's
# fields set those) and the messages, which the template is given from the request's messages.
_APPLY_CHAT_TEMPLATE = inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters
RESERVED_TEMPLATE_KWARGS = frozenset({"messages"} | {name for name, parameter in _APPLY_CHAT_TEMPLATE.items()
                                                     if parameter.kind is not inspect.Parameter.VAR_KEYWORD} - {"self"})


def render_chat_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[ChatMessage], add_generation_prompt: bool,
                       char_limit: PromptCharLimit, tools: list[dict[str, Any]] | None = None, *,
                       continue_final_message: bool = False,
                       template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """Token ids of the conversation (and the tools it may call) as the model was trained to read it; a
    rendering longer than the context could hold is refused before it is tokenized.

    The template writes any special tokens itself, so the tokenizer must not add them again. A family
    whose template reads tool calls and results in its own shapes gets the conversation in those. With
    `continue_final_message` the last message is left open, for the reply to continue it; the template
    also sees `template_kwargs` (vLLM's chat_template_kwargs, such as enable_thinking).
    """
    if not tokenizer.chat_template:
        raise APIError(HTTPStatus.BAD_REQUEST, "this model has no chat template; use /v1/completions instead",
                       param="messages", code="invalid_value")
    reserved = sorted(RESERVED_TEMPLATE_KWARGS.intersection(template_kwargs or {}))
    if reserved:
        raise APIError(HTTPStatus.BAD_REQUEST, f"chat_template_kwargs may not set {quote_value(reserved[0])}: the "
                       f"server sets it from the request", param="chat_template_kwargs", code="invalid_value")
    history = [message.as_template_input() for message in messages]
    family = tool_call_family(tokenizer.chat_template)
    if family is not None and family.history is not None:
        history = family.history(history, tools, tokenizer.chat_template)
    try:
        text = tokenizer.apply_chat_template(history, tools=tools, tokenize=False,
                                             add_generation_prompt=add_generation_prompt,
                                             continue_final_message=continue_final_message, **(template_kwargs or {}))
    except TemplateError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, f"the chat template rejected the messages: {error}",
                       param="messages", code="invalid_value") from None
    except (TypeError, ValueError) as error:
        # transformers' check that the template writes out the last message, so that it can be left open; a
        # template variable the kwargs replaced with a value of another kind (a string where it calls a function).
        if not (template_kwargs or continue_final_message):
            raise
        asked = "chat_template_kwargs" if template_kwargs else "continue_final_message"
        raise APIError(HTTPStatus.BAD_REQUEST, f"the chat template cannot render the messages with the request's "
                       f"{asked}: {error}", param=asked, code="invalid_value") from None
    char_limit.check(text)
    return encode_text(tokenizer, text, add_special_tokens=False)


async def tokenize_chat(tokenizers: TokenizerPool, messages: list[ChatMessage], add_generation_prompt: bool,
                        tools: list[dict[str, Any]] | None = None, *, continue_final_message: bool = False,
                        template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The conversation's token ids, rendered and tokenized on a tokenizer worker."""
    return await tokenizers.run(partial(
        render_chat_prompt, messages=messages, add_generation_prompt=add_generation_prompt,
        char_limit=tokenizers.char_limit, tools=tools, continue_final_message=continue_final_message,
        template_kwargs=template_kwargs))


router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, raw: Request, state: ServerState = State) -> Response:
    accept_generation(raw, state, body)
    return await create_chat_completion(raw, state, body)


async def create_chat_completion(raw: Request, state: ServerState, body: ChatCompletionRequest) -> Response:
    tracker = state.new_tracker("chatcmpl", raw, body.messages)
    with tracker.logging_rejection():
        served = state.serve(body.model, tracker, body.user)
        engine = served.engine
        refuse_unimplemented(body)
        body = capped_max_tokens(raw, body)
        tool_use = plan_tool_use(body, engine.tokenizer.chat_template)
        constraint = _output_constraint(body, tool_use)
        params = chat_sampling_params(body, engine.inputs.check_params,
                                      state.config.http.max_sequences_per_request, constraint)
        await check_tool_schemas(engine, body)  # first: a forced call's grammar is then a cache hit
        await compile_grammar(engine, constraint)
        tools = tool_use.template_tools if tool_use is not None else None
        token_ids = await tokenize_chat(served.tokenizers, body.messages, body.add_generation_prompt, tools,
                                        continue_final_message=body.continue_final_message,
                                        template_kwargs=body.chat_template_kwargs)
        tracker.on_tokens = await admit_generation(raw, body, params, [len(token_ids)], engine.max_context_len)
    num_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    builder = ChatBuilder(tracker.request_id, int(tracker.arrival_time), served.version_id, num_logprobs,
                          engine.tokenizer, tool_use)
    return await serve_generation(raw, served, tracker, [TokenizedPrompt(token_ids)], params, body, builder,
                                  response_cache_lookup(state, raw, body, params, served))


def _output_constraint(body: ChatCompletionRequest, tool_use: ToolUse | None) -> OutputConstraint | None:
    """What the reply must match: a forced tool call's grammar, or what the request's own fields ask
    (never both: each would set the reply's whole shape)."""
    constraint = requested_constraint(body)
    if tool_use is None or tool_use.constraint is None:
        return constraint
    if constraint is not None:
        raise APIError(HTTPStatus.BAD_REQUEST, f"tool_choice forces a tool call, whose shape its grammar sets, and "
                       f"{constraint.field} also constrains the output; give only one of them",
                       param="tool_choice", code="invalid_value")
    return OutputConstraint(tool_use.constraint, "tools")


@dataclass
class ChatBuilder:
    request_id: str
    created: int
    model: str
    num_logprobs: int | None
    tokenizer: PreTrainedTokenizerBase
    tool_use: ToolUse | None = None
    _tool_streams: dict[int, ToolCallStream] = field(default_factory=dict, init=False)  # by choice index

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> ChatCompletionResponse:
        (output,) = outputs  # a chat request holds one conversation
        choices = []
        for completion in output.outputs:
            message, made_calls = self._message(completion)
            choices.append(ChatChoice(
                index=completion.index,
                message=message,
                logprobs=self._logprobs(completion.token_ids, completion.logprobs),
                finish_reason=self._finish_reason(completion.finish_reason, made_calls),
            ))
        return ChatCompletionResponse(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                      usage=usage)

    def _message(self, completion: CompletionOutput) -> tuple[AssistantMessage, bool]:
        """The reply, its tool calls read out when the request reads any; and whether it made calls."""
        if self.tool_use is None or self.tool_use.new_parser is None:
            return AssistantMessage(content=completion.text), False
        parsed = self.tool_use.new_parser().parse(completion.text, final=True)
        if not parsed.calls:
            return AssistantMessage(content=parsed.content), False
        calls = [ToolCall(id=new_tool_call_id(), function=FunctionCall(name=call.name, arguments=call.arguments))
                 for call in parsed.calls]
        return AssistantMessage(content=visible_content(parsed, final=True) or None, tool_calls=calls), True

    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> ChatCompletionChunk:
        # The role goes out once, with each choice's first chunk.
        role = "assistant" if delta.is_first else None
        finish_reason = delta.finish_reason
        if self.tool_use is None or self.tool_use.new_parser is None:
            message = DeltaMessage(role=role, content=delta.text)
        else:
            stream = self._tool_streams.setdefault(delta.index, ToolCallStream(self.tool_use.new_parser()))
            piece = stream.advance(delta.text, final=finish_reason is not None)
            message = _delta_message(role, piece)
            finish_reason = self._finish_reason(finish_reason, stream.made_calls)
        choice = ChatChunkChoice(index=delta.index, delta=message,
                                 logprobs=self._logprobs(delta.token_ids, delta.logprobs),
                                 finish_reason=finish_reason)
        return self._chunk([choice], None)

    def usage_chunk(self, usage: UsageInfo) -> ChatCompletionChunk:
        return self._chunk([], usage)

    def _chunk(self, choices: list[ChatChunkChoice], usage: UsageInfo | None) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                   usage=usage)

    def _finish_reason(self, engine_reason: str | None, made_calls: bool) -> str | None:
        """OpenAI's reason for a reply that ended with calls made ("tool_calls", or "stop" for a named
        function); a cut-off one stays "length"."""
        if made_calls and engine_reason == "stop" and self.tool_use is not None:
            return self.tool_use.calls_finish_reason
        return engine_reason

    def _logprobs(self, token_ids: list[int], positions: list[PositionLogprobs] | None) -> ChatLogprobs | None:
        if self.num_logprobs is None or positions is None:
            return None
        return chat_logprobs(token_ids, positions, self.num_logprobs, token_decoder(self.tokenizer))




def _delta_message(role: str | None, piece: StreamPiece) -> DeltaMessage:
    calls = [DeltaToolCall(index=call.index, id=call.id, type="function" if call.id is not None else None,
                           function=DeltaFunctionCall(name=call.name, arguments=call.arguments))
             for call in piece.calls]
    return DeltaMessage(role=role, content=piece.content if piece.content or not calls else None,
                        tool_calls=calls or None)
