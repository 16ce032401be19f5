"""Request bodies of the OpenAI-compatible API: OpenAI's field names plus a few of vLLM's.

Unknown fields are ignored, as OpenAI does. Known fields are checked strictly ("0.5" is not a
number), and a wrong type is answered with 400 naming the field. Values are range-checked by
SamplingParams, so its messages and limits are the only ones a user meets.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class APIModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class StreamOptions(APIModel):
    include_usage: bool = False


class GenerationRequest(APIModel):
    """Fields that completions and chat completions share. None means the default."""

    model: str | None = None
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    priority: int = 0
    # vLLM's extras, for users who already send them.
    ignore_eos: bool = False
    min_tokens: int = 0
    stop_token_ids: list[int] | None = None

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(GenerationRequest):
    prompt: str | list[int]
    max_tokens: int | None = 16
    echo: bool = False
    logprobs: int | None = None


class TextContentPart(APIModel):
    type: Literal["text"]
    text: str


class ChatMessage(APIModel):
    role: str
    content: str | list[TextContentPart] | None = None

    def as_template_input(self) -> dict[str, str]:
        """The plain {role, content} mapping chat templates expect; text parts join with newlines."""
        if isinstance(self.content, list):
            text = "\n".join(part.text for part in self.content)
        else:
            text = self.content or ""
        return {"role": self.role, "content": text}


class ChatCompletionRequest(GenerationRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    add_generation_prompt: bool = True


class TokenizeRequest(APIModel):
    """Either a prompt, or chat messages rendered with the model's chat template."""

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        return self


class TokenizeResponse(APIModel):
    count: int
    max_model_len: int
    tokens: list[int]


class DetokenizeRequest(APIModel):
    model: str | None = None
    tokens: list[int]


class DetokenizeResponse(APIModel):
    prompt: str
