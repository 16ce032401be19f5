"""POST /v1/chat/completions: messages rendered with the model's chat template, a reply out."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http import HTTPStatus

from fastapi import APIRouter, Request, Response
from transformers import PreTrainedTokenizerBase

from autoglm.outputs import PositionLogprobs, RequestOutput
from autoglm.server.dependencies import State
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.logprobs import chat_logprobs, token_decoder
from autoglm.server.openai.output_constraints import OutputConstraint, compile_grammar, requested_constraint
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.openai.responses import (
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatLogprobs,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    UsageInfo,
)
from autoglm.server.openai.sampling import chat_sampling_params
from autoglm.server.openai.generation import (
    ResponseBuilder,
    accept_generation,
    response_cache_lookup,
    serve_generation,
)
from autoglm.server.state import ServerState
from autoglm.server.tenants.max_tokens_cap import capped_max_tokens
from autoglm.server.tenants.request_budget import admit_generation
from autoglm.server.openai.streaming import ChoiceDelta, ChunkStream
from autoglm.server.media.conversation import chat_prompt
from autoglm.server.openai.chat_reply import ReplyPiece, ReplyReading, ReplyStream
from autoglm.server.openai.chat_template_choice import request_rendering
from autoglm.server.reasoning.thinking_bounds import request_thinking, turn_phase
from autoglm.server.tool_calls.tool_schemas import check_tool_schemas
from autoglm.server.tool_calls.tool_use import ToolUse, plan_tool_use
from autoglm.server.openai.unsupported import refuse_unimplemented


router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, raw: Request, state: ServerState = State) -> Response:
    accept_generation(raw, state, body)
    return await create_chat_completion(raw, state, body)


@dataclass(frozen=True)
class ChatReplyContext:
    """What the builder of a chat reply knows of its request, whichever API's shapes it answers in."""

    request_id: str
    created: int
    model: str  # the served version's name
    num_logprobs: int | None  # None: no log-probs asked for
    tokenizer: PreTrainedTokenizerBase
    reading: ReplyReading  # the reply's thinking, answer and tool calls, as the request's parsers read them


ReplyBuilderFactory = Callable[[ChatReplyContext], ResponseBuilder]


def chat_completion_builder(context: ChatReplyContext) -> ChatBuilder:
    return ChatBuilder(context.request_id, context.created, context.model, context.num_logprobs, context.tokenizer,
                       context.reading)


async def create_chat_completion(raw: Request, state: ServerState, body: ChatCompletionRequest,
                                 reply_builder: ReplyBuilderFactory = chat_completion_builder) -> Response:
    """Run a chat request; ``reply_builder`` shapes its answer (OpenAI's chat completion unless another API's
    route, having translated its request into this one, gives its own)."""
    tracker = state.new_tracker("chatcmpl", raw, body.messages)
    with tracker.logging_rejection():
        served = state.serve(body.model, tracker, body.user)
        engine = served.engine
        refuse_unimplemented(body)
        body = capped_max_tokens(raw, body)
        parsers = state.chat_parsers
        rendering = request_rendering(body, state.config.chat, engine.tokenizer.chat_template,
                                      find_reply_opening=parsers.reasoning is not None)
        template = rendering.chat_template or engine.tokenizer.chat_template
        tool_use = plan_tool_use(body, template, parsers.tool_calls, state.config.chat.enable_auto_tool_choice)
        constraint = _output_constraint(body, tool_use)
        params = chat_sampling_params(body, engine.inputs.check_params,
                                      state.config.http.max_sequences_per_request, constraint)
        await check_tool_schemas(engine, body)  # first: a forced call's grammar is then a cache hit
        await compile_grammar(engine, constraint)
        rendered = await chat_prompt(served.tokenizers, served.images, body.messages, rendering,
                                     tool_use.template_tools if tool_use is not None else None,
                                     body.mm_processor_kwargs)
        phase = turn_phase(parsers.reasoning, rendered.reply_opening)
        params = replace(params, thinking=request_thinking(parsers.reasoning, engine.tokenizer, phase,
                                                           body.thinking_token_budget),
                         skip_special_tokens=params.skip_special_tokens and not parsers.marks_with_special_tokens(
                             engine.tokenizer, tool_use))
        tracker.on_tokens = await admit_generation(raw, body, params, [len(rendered.prompt.token_ids)],
                                                   engine.max_context_len)
    reading = ReplyReading(parsers.reasoning, phase, body.include_reasoning, tool_use,
                           on_malformed_call=parsers.malformed_call_counter(state.metrics, tool_use))
    num_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    builder = reply_builder(ChatReplyContext(tracker.request_id, int(tracker.arrival_time), served.version_id,
                                             num_logprobs, engine.tokenizer, reading))
    return await serve_generation(raw, served, tracker, [rendered.prompt], params, body, builder,
                                  response_cache_lookup(state, raw, body, params, served, rendered.image_hashes))


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
class ChatBuilder(ChunkStream):
    request_id: str
    created: int
    model: str
    num_logprobs: int | None
    tokenizer: PreTrainedTokenizerBase
    reading: ReplyReading = field(default_factory=ReplyReading)
    _streams: dict[int, ReplyStream] = field(default_factory=dict, init=False)  # by choice index

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> ChatCompletionResponse:
        (output,) = outputs  # a chat request holds one conversation
        choices = []
        for completion in output.outputs:
            message, made_calls = self.reading.whole(completion.text, completion.finish_reason)
            choices.append(ChatChoice(
                index=completion.index,
                message=message,
                logprobs=self._logprobs(completion.token_ids, completion.logprobs),
                finish_reason=self._finish_reason(completion.finish_reason, made_calls),
            ))
        return ChatCompletionResponse(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                      usage=usage)

    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> ChatCompletionChunk:
        # The role goes out once, with each choice's first chunk.
        role = "assistant" if delta.is_first else None
        stream = self._streams.setdefault(delta.index, self.reading.new_stream())
        piece = stream.advance(delta.text, delta.finish_reason)
        choice = ChatChunkChoice(index=delta.index, delta=_delta_message(role, piece),
                                 logprobs=self._logprobs(delta.token_ids, delta.logprobs),
                                 finish_reason=self._finish_reason(delta.finish_reason, stream.made_calls))
        return self._chunk([choice], None)

    def usage_chunk(self, usage: UsageInfo) -> ChatCompletionChunk:
        return self._chunk([], usage)

    def _chunk(self, choices: list[ChatChunkChoice], usage: UsageInfo | None) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                   usage=usage)

    def _finish_reason(self, engine_reason: str | None, made_calls: bool) -> str | None:
        """OpenAI's reason for a reply that ended with calls made ("tool_calls", or "stop" for a named
        function); a cut-off one stays "length"."""
        tool_use = self.reading.tool_use
        if made_calls and engine_reason == "stop" and tool_use is not None:
            return tool_use.calls_finish_reason
        return engine_reason

    def _logprobs(self, token_ids: list[int], positions: list[PositionLogprobs] | None) -> ChatLogprobs | None:
        if self.num_logprobs is None or positions is None:
            return None
        return chat_logprobs(token_ids, positions, self.num_logprobs, token_decoder(self.tokenizer))


def _delta_message(role: str | None, piece: ReplyPiece) -> DeltaMessage:
    """A chunk's delta: new thinking, answer and call pieces; content "" only in a delta that has nothing
    else to carry (the tokens are still held back), as each token's chunk is sent all the same."""
    calls = [DeltaToolCall(index=call.index, id=call.id, type="function" if call.id is not None else None,
                           function=DeltaFunctionCall(name=call.name, arguments=call.arguments))
             for call in piece.calls]
    reasoning = piece.reasoning or None
    content = piece.content if piece.content or not (calls or reasoning) else None
    return DeltaMessage(role=role, content=content, reasoning_content=reasoning, reasoning=reasoning,
                        tool_calls=calls or None)
