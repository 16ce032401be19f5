"""POST /v1/chat/completions: messages rendered with the model's chat template, a reply out."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from http import HTTPStatus

from fastapi import Request, Response
from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from autoglm.engine.tokenize import PromptCharLimit, TokenizedPrompt, encode_text
from autoglm.outputs import PositionLogprobs, RequestOutput
from autoglm.server.errors import APIError
from autoglm.server.logprobs import chat_logprobs, token_decoder
from autoglm.server.output_constraints import compile_grammar, requested_constraint
from autoglm.server.protocol import ChatCompletionRequest, ChatMessage
from autoglm.server.responses import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatLogprobs,
    DeltaMessage,
    UsageInfo,
)
from autoglm.server.sampling import chat_sampling_params
from autoglm.server.serving import response_cache_lookup, serve_generation
from autoglm.server.state import ServerState
from autoglm.server.tenants.max_tokens_cap import capped_max_tokens
from autoglm.server.tenants.request_budget import admit_generation
from autoglm.server.streaming import ChoiceDelta
from autoglm.server.tokenizer_pool import TokenizerPool
from autoglm.server.unsupported import refuse_unimplemented


def render_chat_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[ChatMessage], add_generation_prompt: bool,
                       char_limit: PromptCharLimit) -> list[int]:
    """Token ids of the conversation as the model was trained to read it; a rendering longer than the
    context could hold is refused before it is tokenized.

    The template writes any special tokens itself, so the tokenizer must not add them again.
    """
    if not tokenizer.chat_template:
        raise APIError(HTTPStatus.BAD_REQUEST, "this model has no chat template; use /v1/completions instead",
                       param="messages", code="invalid_value")
    try:
        text = tokenizer.apply_chat_template([message.as_template_input() for message in messages],
                                             tokenize=False, add_generation_prompt=add_generation_prompt)
    except TemplateError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, f"the chat template rejected the messages: {error}",
                       param="messages", code="invalid_value") from None
    char_limit.check(text)
    return encode_text(tokenizer, text, add_special_tokens=False)


async def tokenize_chat(tokenizers: TokenizerPool, messages: list[ChatMessage],
                        add_generation_prompt: bool) -> list[int]:
    """The conversation's token ids, rendered and tokenized on a tokenizer worker."""
    return await tokenizers.run(partial(render_chat_prompt, messages=messages,
                                        add_generation_prompt=add_generation_prompt, char_limit=tokenizers.char_limit))


async def create_chat_completion(raw: Request, state: ServerState, body: ChatCompletionRequest) -> Response:
    tracker = state.new_tracker("chatcmpl", raw, body.messages)
    with tracker.logging_rejection():
        served = state.serve(body.model, tracker, body.user)
        engine = served.engine
        refuse_unimplemented(body)
        body = capped_max_tokens(raw, body)
        constraint = requested_constraint(body)
        params = chat_sampling_params(body, engine.engine.model_config.vocab_size,
                                      state.config.max_sequences_per_request, constraint)
        await compile_grammar(engine.engine, constraint)
        token_ids = await tokenize_chat(served.tokenizers, body.messages, body.add_generation_prompt)
        tracker.on_tokens = await admit_generation(raw, len(token_ids))
    num_logprobs = (body.top_logprobs or 0) if body.logprobs else None
    builder = ChatBuilder(tracker.request_id, int(tracker.arrival_time), served.version_id, num_logprobs,
                          engine.engine.tokenizer)
    return await serve_generation(raw, served, tracker, [TokenizedPrompt(token_ids)], params, body, builder,
                                  response_cache_lookup(state, raw, body, params, served))


@dataclass
class ChatBuilder:
    request_id: str
    created: int
    model: str
    num_logprobs: int | None
    tokenizer: PreTrainedTokenizerBase

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> ChatCompletionResponse:
        (output,) = outputs  # a chat request holds one conversation
        choices = [
            ChatChoice(
                index=completion.index,
                message=AssistantMessage(content=completion.text),
                logprobs=self._logprobs(completion.token_ids, completion.logprobs),
                finish_reason=completion.finish_reason,
            )
            for completion in output.outputs
        ]
        return ChatCompletionResponse(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                      usage=usage)

    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> ChatCompletionChunk:
        # The role goes out once, with each choice's first chunk.
        message = DeltaMessage(role="assistant" if delta.is_first else None, content=delta.text)
        choice = ChatChunkChoice(index=delta.index, delta=message,
                                 logprobs=self._logprobs(delta.token_ids, delta.logprobs),
                                 finish_reason=delta.finish_reason)
        return self._chunk([choice], None)

    def usage_chunk(self, usage: UsageInfo) -> ChatCompletionChunk:
        return self._chunk([], usage)

    def _chunk(self, choices: list[ChatChunkChoice], usage: UsageInfo | None) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                   usage=usage)

    def _logprobs(self, token_ids: list[int], positions: list[PositionLogprobs] | None) -> ChatLogprobs | None:
        if self.num_logprobs is None or positions is None:
            return None
        return chat_logprobs(token_ids, positions, self.num_logprobs, token_decoder(self.tokenizer))
