"""Request bodies of Anthropic's Messages API, checked as strictly as the chat side's (see openai/protocol.py).

Each is refused with a 400 naming the field at fault: an unknown field (with the closest known name), a
block this server cannot read (with the block types it can), one of Anthropic's server tools, a tool result
answering no earlier tool use. Fields of Anthropic's that this server cannot honour are declared, so that
they are refused by name (unsupported.py) rather than as unknown. Anthropic's cache breakpoints
(``cache_control``) are accepted everywhere and dropped: the prefix cache needs none.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from autoglm.errors import InvalidRequestError, quote_value
from autoglm.server.openai.protocol import APIModel

# The tool names the chat side takes (OpenAI's rule for a function's name; Anthropic's allows up to 128).
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# Which blocks each role's turn may hold.
_ROLE_BLOCKS = {"user": ("text", "image", "tool_result"),
                "assistant": ("text", "thinking", "redacted_thinking", "tool_use")}


def _text_as_blocks(content: Any) -> Any:
    """Anthropic's shorthand: a string stands for one text block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _cache_control() -> Any:
    """A block's cache breakpoint: accepted, and excluded from dumps so that it never splits the response cache."""
    return Field(default=None, exclude=True)


class TextBlock(APIModel):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = _cache_control()
    # Where an earlier reply's text came from: it does not change what the model reads.
    citations: list[dict[str, Any]] | None = Field(default=None, exclude=True)


class Base64Source(APIModel):
    type: Literal["base64"]
    media_type: Literal["image/png", "image/jpeg", "image/webp"]  # what the image decoder reads (not GIF)
    data: str

    @property
    def url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


class URLSource(APIModel):
    type: Literal["url"]
    url: str  # http(s):// or file://, as an image_url part takes it (see server/media/image_sources.py)


class ImageBlock(APIModel):
    """An image, read where the model takes images, as the chat side's image_url part is."""

    type: Literal["image"]
    source: Annotated[Base64Source | URLSource, Field(discriminator="type")]
    cache_control: dict[str, Any] | None = _cache_control()


class ToolUseBlock(APIModel):
    """A call an earlier assistant turn made."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = _cache_control()


class ToolResultBlock(APIModel):
    """What a call returned, in a user turn; ``is_error`` is accepted and not rendered, for chat templates have no
    place for it (a failed tool's text usually says so itself)."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: list[TextBlock] = []
    is_error: bool = False
    cache_control: dict[str, Any] | None = _cache_control()

    @model_validator(mode="before")
    @classmethod
    def _text_content(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            return data
        for index, block in enumerate(data["content"]):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind != "text":
                raise InvalidRequestError(f"a tool result's content is a string or text blocks on this server, and "
                                          f"this block is of type {quote_value(kind)}", param=f"content[{index}].type")
        return data

    _content = field_validator("content", mode="before", json_schema_input_type=str | list[TextBlock])(_text_as_blocks)


class ThinkingBlock(APIModel):
    """An earlier turn's thinking: given to the chat template as that turn's reasoning, which it renders where
    the model was trained to see it (GLM's templates: in the turns since the last user message, as in a loop
    of tool calls). Its signature is not checked."""

    type: Literal["thinking"]
    thinking: str
    signature: str = ""
    cache_control: dict[str, Any] | None = _cache_control()


class RedactedThinkingBlock(APIModel):
    """Thinking Anthropic encrypted: no model here can read it, so it is dropped."""

    type: Literal["redacted_thinking"]
    data: str


ContentBlock = Annotated[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock
                         | RedactedThinkingBlock, Field(discriminator="type")]


class Message(APIModel):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    _content = field_validator("content", mode="before", json_schema_input_type=str | list[ContentBlock])(
        _text_as_blocks)

    @model_validator(mode="after")
    def _blocks_of_its_role(self) -> Message:
        allowed = _ROLE_BLOCKS[self.role]
        for index, block in enumerate(self.content):
            if block.type not in allowed:
                raise InvalidRequestError(f"{quote_value(block.type)} blocks have no place in {self.role} turns, "
                                          f"which hold {', '.join(allowed)} blocks", param=f"content[{index}].type")
        return self


class Tool(APIModel):
    """A tool the client runs, as a chat request's function. Anthropic's own server tools (web search, code
    execution, ...) run on Anthropic's side and are refused naming their type. ``strict`` changes nothing: a
    forced call always matches its schema, and a chosen call's arguments are checked against it."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    type: Literal["custom"] | None = None
    strict: bool | None = None
    eager_input_streaming: bool | None = None  # a call's input streams as it is written whatever this says
    cache_control: dict[str, Any] | None = _cache_control()

    @model_validator(mode="before")
    @classmethod
    def _a_client_tool(cls, data: Any) -> Any:
        """Checked before the fields, as a server tool has fields of its own (max_uses, ...) a custom one lacks."""
        if isinstance(data, dict) and data.get("type") not in (None, "custom"):
            raise InvalidRequestError(f"{quote_value(data['type'])} is one of Anthropic's server tools, which run on "
                                      f"Anthropic's side and this server does not have; declare the tools your "
                                      f"client runs, with name, description and input_schema", param="type")
        return data

    @field_validator("name")
    @classmethod
    def _chat_name(cls, name: str) -> str:
        if _TOOL_NAME.fullmatch(name) is None:
            raise InvalidRequestError("a tool name must be 1 to 64 letters, digits, underscores or dashes")
        return name

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type") != "object":
            raise InvalidRequestError('input_schema must be the JSON schema of an object ("type": "object")')
        return schema


class ToolChoiceAuto(APIModel):
    type: Literal["auto"]
    disable_parallel_tool_use: bool = False


class ToolChoiceAny(APIModel):
    type: Literal["any"]
    disable_parallel_tool_use: bool = False


class ToolChoiceTool(APIModel):
    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: bool = False  # a named call is one call


class ToolChoiceNone(APIModel):
    type: Literal["none"]


ToolChoice = Annotated[ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone, Field(discriminator="type")]


class ThinkingEnabled(APIModel):
    """Thinking on, with a budget the engine keeps (Anthropic's minimum of 1024 is not enforced, for small models
    think in fewer tokens). ``display: "omitted"`` leaves the thinking out of the answer."""

    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1)
    display: Literal["summarized", "omitted"] | None = None


class ThinkingAdaptive(APIModel):
    """Thinking on, as long as the model likes."""

    type: Literal["adaptive"]
    display: Literal["summarized", "omitted"] | None = None


class ThinkingDisabled(APIModel):
    type: Literal["disabled"]


Thinking = Annotated[ThinkingEnabled | ThinkingAdaptive | ThinkingDisabled, Field(discriminator="type")]


class Metadata(APIModel):
    user_id: str | None = None  # the chat request's user: it routes a user's requests to one version


class JSONOutputFormat(APIModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")  # `schema` would shadow BaseModel's


class OutputConfig(APIModel):
    format: JSONOutputFormat | None = None  # the answer's text as JSON matching the schema
    effort: str | None = None  # not implemented: see unsupported.py


class MessagesPrompt(APIModel):
    """What both routes render into a prompt: the conversation, the system prompt, the tools and thinking."""

    model: str
    messages: list[Message] = Field(min_length=1)
    system: list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    cache_control: dict[str, Any] | None = _cache_control()

    _system = field_validator("system", mode="before", json_schema_input_type=str | list[TextBlock] | None)(
        _text_as_blocks)

    @model_validator(mode="after")
    def _results_answer_calls(self) -> MessagesPrompt:
        """Each tool_result must answer a tool_use of an earlier assistant turn, as Anthropic requires: a result
        the model never asked for would be rendered as if it had."""
        calls_made: set[str] = set()
        for message_index, message in enumerate(self.messages):
            for block_index, block in enumerate(message.content):
                if isinstance(block, ToolUseBlock):
                    calls_made.add(block.id)
                elif isinstance(block, ToolResultBlock) and block.tool_use_id not in calls_made:
                    raise InvalidRequestError(
                        f"tool_result answers tool_use {quote_value(block.tool_use_id)}, which no earlier assistant "
                        f"turn holds; a tool_result must follow the assistant turn whose tool_use it answers",
                        param=f"messages[{message_index}].content[{block_index}].tool_use_id")
        return self


class MessagesRequest(MessagesPrompt):
    max_tokens: int  # required, as Anthropic requires it
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)  # Anthropic's range
    top_p: float | None = None
    top_k: int | None = None
    stream: bool = False
    metadata: Metadata | None = None
    output_config: OutputConfig | None = None
    # Anthropic's fields this server cannot honour: accepted only at values that ask for nothing.
    service_tier: str | None = None
    container: str | dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] | None = None
    context_management: dict[str, Any] | None = None
    inference_geo: str | None = None
    speed: str | None = None
    diagnostics: dict[str, Any] | None = None


class CountTokensRequest(MessagesPrompt):
    pass


class CountTokensResponse(APIModel):
    input_tokens: int
