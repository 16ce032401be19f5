"""Response bodies and stream chunks, field for field as OpenAI returns them."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class UsageInfo(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class CompletionLogprobs(BaseModel):
    """The legacy completions shape: parallel lists, one entry per token."""

    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None


class CompletionResponse(BaseModel):
    """A whole completion, or one chunk of a streamed one (then ``usage`` comes last, alone)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[TokenLogprob]


class FunctionCall(BaseModel):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


def _absent(value: object) -> bool:
    return value is None


class AssistantMessage(BaseModel):
    """The reply; with a reasoning parser, its thinking apart from the answer, under vLLM's two names
    (``reasoning_content``, which most clients read, and ``reasoning``, its newer spelling)."""

    role: Literal["assistant"] = "assistant"
    content: str | None  # None when the reply is only tool calls
    reasoning_content: str | None = Field(default=None, exclude_if=_absent)
    reasoning: str | None = Field(default=None, exclude_if=_absent)
    tool_calls: list[ToolCall] | None = Field(default=None, exclude_if=_absent)


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo


class DeltaFunctionCall(BaseModel):
    name: str | None = Field(default=None, exclude_if=_absent)  # in the call's first delta only
    arguments: str  # the next piece of the arguments' JSON text


class DeltaToolCall(BaseModel):
    """A call's first delta carries its id, type and name; later ones only pieces of its arguments."""

    index: int
    id: str | None = Field(default=None, exclude_if=_absent)
    type: Literal["function"] | None = Field(default=None, exclude_if=_absent)
    function: DeltaFunctionCall


class DeltaMessage(BaseModel):
    """What a chunk adds to a choice's message: the role in its first chunk only, then what is new. A field
    with nothing to add is left out, as OpenAI leaves it out, rather than sent as null."""

    role: Literal["assistant"] | None = Field(default=None, exclude_if=_absent)
    content: str | None = Field(default=None, exclude_if=_absent)
    reasoning_content: str | None = Field(default=None, exclude_if=_absent)  # thinking, as AssistantMessage's
    reasoning: str | None = Field(default=None, exclude_if=_absent)
    tool_calls: list[DeltaToolCall] | None = Field(default=None, exclude_if=_absent)


class ChatChunkChoice(BaseModel):
    index: int
    delta: DeltaMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: UsageInfo | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "autoglm"
    root: str
    parent: str | None = None  # a version's model, on a server serving a registry's versions
    max_model_len: int
    aliases: list[str] | None = None  # a version's aliases (stable, canary, ...)
    input_modalities: list[Literal["text", "image"]] = ["text"]  # what its prompts may hold: images too or not
    # What it serves: "generate" (completions, chat, responses, messages), or the pooling tasks of a pooling
    # model ("embed"; "classify" and "score"), which the embeddings, rerank and score routes ask of it.
    tasks: list[str] = ["generate"]


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class TokenizerInfo(BaseModel):
    """vLLM's /tokenizer_info: the tokenizer's configuration as its tokenizer_config.json gives it, the
    special tokens as text; never where the model sits on disk."""

    tokenizer_class: str
    model_max_length: int  # the context the server serves, which a client's prompt plus reply must fit
    bos_token: str | None
    eos_token: str | None
    pad_token: str | None
    unk_token: str | None
    chat_template: str | None
