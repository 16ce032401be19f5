"""The request body of POST /v1/responses, field for field as OpenAI's, checked as strictly as the chat body.

An item, content part, tool or tool choice is told apart by its ``type`` (a message may leave it out, as
OpenAI's SDKs write one); one of a type this server does not serve parses as ``Unserved``, so that
unsupported.py refuses it by where it stands (``tools[1].type``) rather than pydantic listing every shape
it tried. Fields that ask for nothing this server does not do are declared and accepted; those it cannot
honour are refused in unsupported.py.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from autoglm.errors import InvalidRequestError
from autoglm.server.openai.protocol import APIModel, FunctionDefinition, GenerationRequest
from autoglm.server.responses_api.objects import ItemStatus

# OpenAI's bounds on a response's metadata.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
# The tag of a shape this server does not serve.
UNSERVED = "unserved"


class Unserved(BaseModel):
    """An item, part, tool or tool choice of a type this server does not serve: refused whole by its type."""

    model_config = ConfigDict(extra="allow")
    type: str


def _tagged_by_type(served: tuple[str, ...], default: str) -> Callable[[Any], str]:
    """The union member a value is read as: its ``type`` (`default` when it has none) if served, else
    ``Unserved``. A value that is not an object is read as `default`'s shape, whose error then says so."""
    def tag(value: Any) -> str:
        if not isinstance(value, (dict, BaseModel)):
            return default
        kind = value.get("type", default) if isinstance(value, dict) else value.type
        return kind if kind in served else UNSERVED
    return tag


# What OpenAI's SDKs write in an item or part they send back as they received it, which changes nothing
# the model reads: accepted, and left out of what is kept.
_SENT_BACK_AS_RECEIVED = Field(default=None, exclude=True)


class InputText(APIModel):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: dict[str, Any] | None = _SENT_BACK_AS_RECEIVED  # the prefix cache needs none


class InputImage(APIModel):
    """An image by URL (http(s), data: or file:, as chat's image parts); OpenAI's file ids are refused."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high"] = "auto"
    prompt_cache_breakpoint: dict[str, Any] | None = _SENT_BACK_AS_RECEIVED


class OutputText(APIModel):
    """An earlier answer's text, as the Response gave it: its annotations and log-probs are not read."""

    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] | None = Field(default=None, exclude=True)


class RefusalPart(APIModel):
    """An earlier answer's refusal: accepted and not rendered, as chat's refusal parts."""

    type: Literal["refusal"]
    refusal: str


_PART_TYPES = ("input_text", "input_image", "output_text", "refusal")
ContentPart = Annotated[
    Annotated[InputText, Tag("input_text")] | Annotated[InputImage, Tag("input_image")]
    | Annotated[OutputText, Tag("output_text")] | Annotated[RefusalPart, Tag("refusal")]
    | Annotated[Unserved, Tag(UNSERVED)],
    Discriminator(_tagged_by_type(_PART_TYPES, "input_text")),
]


class MessageItem(APIModel):
    """A turn of the conversation: the user's, the system's or developer's, or an earlier answer. Content
    given as a string is read as one text part, as OpenAI lists it back."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: list[ContentPart]
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    @field_validator("content", mode="before", json_schema_input_type=str | list[ContentPart])
    @classmethod
    def _text_as_a_part(cls, content: Any, info: ValidationInfo) -> Any:
        if not isinstance(content, str):
            return content
        if info.data.get("role") == "assistant":
            return [{"type": "output_text", "text": content, "annotations": []}]
        return [{"type": "input_text", "text": content}]


class FunctionCallItem(APIModel):
    """A call an earlier answer made."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str  # JSON text, as the model wrote it
    id: str | None = None
    status: ItemStatus | None = None
    caller: dict[str, Any] | None = _SENT_BACK_AS_RECEIVED
    namespace: str | None = _SENT_BACK_AS_RECEIVED
    created_by: str | None = _SENT_BACK_AS_RECEIVED


class FunctionCallOutputItem(APIModel):
    """What the client's function returned for a call."""

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ContentPart]
    id: str | None = None
    status: ItemStatus | None = None
    caller: dict[str, Any] | None = _SENT_BACK_AS_RECEIVED
    namespace: str | None = _SENT_BACK_AS_RECEIVED
    created_by: str | None = _SENT_BACK_AS_RECEIVED
    name: str | None = _SENT_BACK_AS_RECEIVED


class ReasoningText(APIModel):
    type: Literal["reasoning_text"]
    text: str


class SummaryText(APIModel):
    type: Literal["summary_text"]
    text: str


class ReasoningItem(APIModel):
    """An earlier answer's thinking; ``encrypted_content`` is this server's own, which holds the thinking as
    it was written (see objects.py)."""

    type: Literal["reasoning"]
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    id: str | None = None
    status: ItemStatus | None = None

    @property
    def text(self) -> str:
        """The thinking: its full text where the item has it, else its summary, else the encrypted copy."""
        if self.content:
            return "".join(part.text for part in self.content)
        if self.summary:
            return "\n\n".join(part.text for part in self.summary)
        return self.encrypted_content or ""


_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")
InputItem = Annotated[
    Annotated[MessageItem, Tag("message")] | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")] | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[Unserved, Tag(UNSERVED)],
    Discriminator(_tagged_by_type(_ITEM_TYPES, "message")),
]


class FunctionTool(FunctionDefinition):
    """A function tool in the Responses API's flat shape: the chat tool's function fields beside its type."""

    type: Literal["function"]


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")] | Annotated[Unserved, Tag(UNSERVED)],
    Discriminator(_tagged_by_type(("function",), "function")),
]


class FunctionChoice(APIModel):
    type: Literal["function"]
    name: str


ToolChoice = Annotated[
    Annotated[FunctionChoice, Tag("function")] | Annotated[Unserved, Tag(UNSERVED)],
    Discriminator(_tagged_by_type(("function",), "function")),
]


class TextFormat(APIModel):
    """``text.format``: plain text, any JSON object, or JSON matching a named schema (always enforced, so
    ``strict`` changes nothing)."""

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")  # `schema` would shadow BaseModel's
    strict: bool | None = None

    @model_validator(mode="after")
    def _a_named_schema_with_its_type(self) -> TextFormat:
        if self.type == "json_schema" and (self.name is None or self.schema_ is None):
            raise InvalidRequestError("a 'json_schema' format needs its name and its schema")
        if self.type != "json_schema" and (self.name, self.description, self.schema_) != (None, None, None):
            raise InvalidRequestError(f"name, description and schema belong to a 'json_schema' format, not a "
                                      f"{self.type!r} one")
        return self


class TextConfig(APIModel):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None  # not implemented: see unsupported.py


class ReasoningConfig(APIModel):
    """How hard the model thinks (see effort.py); the summary asked for is accepted, and the thinking is given
    whole instead."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None  # summary's deprecated name


class ResponsesStreamOptions(APIModel):
    include_obfuscation: bool | None = None  # not implemented: see unsupported.py


class ResponsesRequest(APIModel):
    """None means the default; ``store`` defaults to true, as OpenAI's."""

    model: str | None = None
    input: list[InputItem] = Field(min_length=1)  # a string is one user message
    instructions: str | None = None  # for this response only: a later one's previous_response_id leaves it out
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    include: list[str] | None = None  # what the answer adds: see unsupported.py for what is served
    # vLLM's name for the client's own id of the request, as the chat body's (see GenerationRequest).
    request_id: str | None = Field(default=None, exclude=True)
    # OpenAI's fields that ask nothing of this server's answer: accepted and not used.
    prompt_cache_key: str | None = None  # the prefix cache needs no hint
    safety_identifier: str | None = None
    prompt_cache_options: dict[str, Any] | None = Field(default=None, exclude=True)
    max_tool_calls: int | None = None  # bounds calls to built-in tools, of which this server runs none
    # OpenAI's fields this server does not implement: accepted only at values that ask for nothing.
    background: bool | None = None
    truncation: Literal["auto", "disabled"] | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    context_management: list[dict[str, Any]] | None = None
    top_logprobs: int | None = None
    service_tier: str | None = None
    stream_options: ResponsesStreamOptions | None = None
    prompt_cache_retention: str | None = None
    moderation: dict[str, Any] | None = None

    @field_validator("request_id")
    @classmethod
    def _fits_a_header(cls, request_id: str | None) -> str | None:
        return GenerationRequest._fits_a_header(request_id)

    @field_validator("input", mode="before",
                     json_schema_input_type=str | Annotated[list[InputItem], Field(min_length=1)])
    @classmethod
    def _text_as_a_message(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "message", "role": "user", "content": value}]
        if value == []:
            raise InvalidRequestError("give the input: a string, or at least one item")
        return value

    @field_validator("metadata")
    @classmethod
    def _openai_metadata(cls, metadata: dict[str, str] | None) -> dict[str, str] | None:
        if metadata is None:
            return None
        if len(metadata) > MAX_METADATA_PAIRS:
            raise InvalidRequestError(f"holds {len(metadata)} pairs; at most {MAX_METADATA_PAIRS} are allowed")
        for key, value in metadata.items():
            if len(key) > MAX_METADATA_KEY_CHARS or len(value) > MAX_METADATA_VALUE_CHARS:
                raise InvalidRequestError(f"keys may have at most {MAX_METADATA_KEY_CHARS} characters and values "
                                          f"{MAX_METADATA_VALUE_CHARS}; {key[:MAX_METADATA_KEY_CHARS]!r} is longer")
        return metadata

    @property
    def keeps(self) -> bool:
        """Whether the response is stored: OpenAI's default is to store it."""
        return self.store is not False

    @property
    def streams(self) -> bool:
        return bool(self.stream)
