"""The Response object and its output items, field for field as OpenAI returns them (and its SDK reads them)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

ItemStatus = Literal["in_progress", "completed", "incomplete"]
ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]


def _absent(value: object) -> bool:
    return value is None


class OutputTextPart(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list)


class MessageOutput(BaseModel):
    """The answer's text."""

    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: ItemStatus
    content: list[OutputTextPart]


class ReasoningTextPart(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningOutput(BaseModel):
    """The model's thinking, whole: no summary is written. ``encrypted_content``, when the request includes
    it, is the thinking itself, which a later request may send back (this server has nothing to hide from
    the client it came from)."""

    id: str
    type: Literal["reasoning"] = "reasoning"
    summary: list[dict[str, Any]] = Field(default_factory=list)
    content: list[ReasoningTextPart]
    encrypted_content: str | None = Field(default=None, exclude_if=_absent)
    status: ItemStatus


class FunctionCallMade(BaseModel):
    """A call of one of the request's function tools; ``call_id`` is what its output names."""

    id: str
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str  # JSON text
    status: ItemStatus


OutputItem = ReasoningOutput | MessageOutput | FunctionCallMade


class InputTokensDetails(BaseModel):
    cached_tokens: int  # found in the prefix cache


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


class ResponseError(BaseModel):
    code: str
    message: str


class RequestEcho(BaseModel):
    """What a Response repeats of the request that asked for it."""

    instructions: str | None
    max_output_tokens: int | None
    metadata: dict[str, str]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, Any]
    store: bool
    temperature: float | None
    text: dict[str, Any]
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    top_p: float | None
    truncation: Literal["disabled"] = "disabled"
    user: str | None
    background: bool = False


class ResponseObject(RequestEcho):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    model: str
    output: list[OutputItem]
    usage: ResponseUsage | None = None


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: Literal[True] = True


class InputItemList(BaseModel):
    """A page of a stored response's input items, as OpenAI's list endpoints give one."""

    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool
