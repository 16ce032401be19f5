"""Request bodies of the OpenAI-compatible API: OpenAI's field names plus a few of vLLM's.

Every field of OpenAI's completions and chat-completions requests is declared, so none is
silently dropped: those the server does not implement are accepted only at values that ask for
nothing (see unsupported.py). An unknown field, often a misspelt one, is refused with 400 naming
it and the closest known name. Known fields are checked strictly ("0.5" is not a number), and
values are range-checked by SamplingParams, so its messages and limits are the only ones a user meets.
"""
from __future__ import annotations

import difflib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator
from pydantic_core import PydanticCustomError

from autoglm.config.server import check_image_processor_kwargs
from autoglm.engine.tokenize import Prompt
from autoglm.errors import InvalidRequestError, quote_value

# The pydantic error type of a field the request model does not declare.
UNKNOWN_FIELD = "unknown_field"
# The pydantic error type of text holding a lone surrogate (JSON's "\ud800"): JSON can spell one,
# but it is not Unicode text, so no tokenizer can read it and no UTF-8 answer can quote it.
INVALID_TEXT = "invalid_text"
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a request_id may hold: it goes back in a response header.
MAX_REQUEST_ID_CHARS = 256
_HEADER_VALUE = re.compile(f"[\\x20-\\x7e]{{1,{MAX_REQUEST_ID_CHARS}}}")
# One prompt (text or token ids) or a batch of them, as OpenAI's completions take it.
PromptField = str | list[str] | list[int] | list[list[int]]


class APIModel(BaseModel):
    # Undeclared fields are refused (below, with a better message than extra="forbid" gives); the
    # schema says so too.
    model_config = ConfigDict(strict=True, json_schema_extra={"additionalProperties": False})

    @model_validator(mode="before")
    @classmethod
    def _valid_text_and_known_fields_only(cls, data: Any) -> Any:
        """Refuse text that is not Unicode, carrying where it is; then the first undeclared field,
        carrying the closest declared name for the message."""
        path = _lone_surrogate_at(data)
        if path is not None:
            raise PydanticCustomError(INVALID_TEXT, "text holds a lone surrogate", {"path": path})
        if isinstance(data, dict):
            known = [field.alias or name for name, field in cls.model_fields.items()]
            for name in data:
                if name not in known:
                    closest = difflib.get_close_matches(str(name), known, n=1)
                    raise PydanticCustomError(UNKNOWN_FIELD, "unknown parameter '{field}'",
                                              {"field": name, "closest": closest[0] if closest else None})
        return data


def _lone_surrogate_at(value: Any) -> tuple[int | str, ...] | None:
    """The path within a parsed JSON value to a string holding a lone surrogate (a mapping whose
    key holds one counts as the place), or None when all its text is Unicode. A loop, not
    recursion, so that deeply nested input cannot exhaust the stack; numbers are not even queued."""
    pending: list[tuple[tuple[int | str, ...], Any]] = [((), value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path
            continue
        if isinstance(item, dict):
            if any(isinstance(key, str) and _SURROGATE.search(key) for key in item):
                return path
            children = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        pending.extend(((*path, key), child) for key, child in children if isinstance(child, (str, list, dict)))
    return None


class StreamOptions(APIModel):
    include_usage: bool = False
    include_obfuscation: bool | None = None  # not implemented: see unsupported.py


class JSONSchemaFormat(APIModel):
    """OpenAI's ``response_format.json_schema``. Without a schema the answer is any JSON value;
    the schema is always enforced, so ``strict`` changes nothing."""

    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")  # `schema` would shadow BaseModel's
    strict: bool | None = None


class ResponseFormat(APIModel):
    """OpenAI's ``response_format``: plain text, any JSON object, or JSON matching a schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise InvalidRequestError("json_schema must be given when type is 'json_schema', and only then")
        return self


class StructuredOutputsField(APIModel):
    """vLLM's ``structured_outputs`` extra: exactly one of these (checked by StructuredOutputsParams)."""

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")  # `json` would shadow BaseModel's
    json_object: bool | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None


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
    # vLLM's name for the client's own id of the request: echoed in the x-request-id header and logged,
    # never the engine's id (a retry may send it again). Excluded from dumps: it cannot change the answer.
    request_id: str | None = Field(default=None, exclude=True)
    # vLLM's extras, for users who already send them.
    ignore_eos: bool = False
    min_tokens: int = 0
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: dict[str, float] | None = None  # OpenAI's JSON keys token ids as strings
    # What the output must match: OpenAI's response_format (vLLM takes it on completions too), vLLM's
    # structured_outputs, or the guided_* names vLLM had before it (see output_constraints.py).
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputsField | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    guided_decoding_backend: str | None = None  # accepted where it names what we use: see unsupported.py
    guided_whitespace_pattern: str | None = None  # not implemented: see unsupported.py

    @field_validator("request_id")
    @classmethod
    def _fits_a_header(cls, request_id: str | None) -> str | None:
        if request_id is not None and _HEADER_VALUE.fullmatch(request_id) is None:
            raise InvalidRequestError(f"must be 1 to {MAX_REQUEST_ID_CHARS} printable ASCII characters, as "
                                      f"it is echoed in the x-request-id header")
        return request_id

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(GenerationRequest):
    prompt: PromptField
    max_tokens: int | None = 16
    echo: bool = False
    logprobs: int | None = None
    best_of: int | None = None
    suffix: str | None = None  # not implemented: see unsupported.py

    @field_validator("prompt")
    @classmethod
    def _some_prompt(cls, prompt: PromptField) -> PromptField:
        if prompt == []:
            raise InvalidRequestError("give at least one prompt")
        return prompt

    @property
    def prompts(self) -> list[Prompt]:
        """The batch of prompts this request holds: a lone prompt is a batch of one."""
        if isinstance(self.prompt, str) or isinstance(self.prompt[0], int):
            return [self.prompt]
        return list(self.prompt)


class TextContentPart(APIModel):
    type: Literal["text"]
    text: str
    # Caching hints (OpenAI's breakpoints, the cache_control litellm and Anthropic's clients send): the
    # prefix cache needs none. Excluded from dumps, so that they never split the response cache.
    cache_control: dict[str, Any] | None = Field(default=None, exclude=True)
    prompt_cache_breakpoint: dict[str, Any] | None = Field(default=None, exclude=True)


class RefusalContentPart(APIModel):
    """An assistant reply's refusal, as OpenAI's history carries it: accepted and not rendered, as the
    message's own ``refusal`` field is not."""

    type: Literal["refusal"]
    refusal: str


class ImageURL(APIModel):
    url: str  # data:image/...;base64,..., http(s):// or file://: see autoglm/server/media/image_sources.py
    detail: Literal["auto", "low", "high"] | None = None  # OpenAI's resolution hint: the processor sizes images


class ImageContentPart(APIModel):
    """An image, read where the model takes images (a text-only model refuses it naming the part). Its dump
    keeps its place in the message without the URL: the response cache keys the image by its content."""

    type: Literal["image_url"]
    image_url: ImageURL = Field(exclude=True)

    @field_validator("image_url", mode="before")
    @classmethod
    def _bare_url(cls, image_url: Any) -> Any:
        """Some clients send the URL itself (``"image_url": "data:..."``), as vLLM accepts."""
        return {"url": image_url} if isinstance(image_url, str) else image_url


class MediaContentPart(BaseModel):
    """An audio, video or file part: its fields are not checked, for it is refused whole with a message
    naming it rather than one of its fields."""

    model_config = ConfigDict(extra="allow")
    type: Literal["input_audio", "file", "audio_url", "video_url"]


ContentPart = Annotated[TextContentPart | RefusalContentPart | ImageContentPart | MediaContentPart,
                        Field(discriminator="type")]
# What a message's content list may hold.
AnyPart = TextContentPart | RefusalContentPart | ImageContentPart | MediaContentPart


# OpenAI's rule for a function's name.
_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class FunctionDefinition(APIModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON schema of an object; None: the function takes none
    strict: bool | None = None  # forced calls always match the schema; others are parsed as written

    @field_validator("name")
    @classmethod
    def _openai_name(cls, name: str) -> str:
        if _FUNCTION_NAME.fullmatch(name) is None:
            raise InvalidRequestError("a function name must be 1 to 64 letters, digits, underscores or dashes")
        return name

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, parameters: dict[str, Any] | None) -> dict[str, Any] | None:
        if parameters is not None and parameters.get("type") != "object":
            raise InvalidRequestError('parameters must be the JSON schema of an object ("type": "object")')
        return parameters


class ToolDefinition(APIModel):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(APIModel):
    name: str


class NamedToolChoice(APIModel):
    type: Literal["function"]
    function: FunctionName


class FunctionCallInput(APIModel):
    name: str
    arguments: str  # JSON text, as the assistant's earlier reply gave it


class ToolCallInput(APIModel):
    """A call an earlier assistant reply made, sent back in the conversation."""

    id: str
    type: Literal["function"]
    function: FunctionCallInput


# The roles a chat message may have, as OpenAI names them.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
# Fields only an assistant message carries (what the model said and did in an earlier turn).
_ASSISTANT_FIELDS = ("tool_calls", "function_call", "refusal", "audio", "annotations", "reasoning_content",
                     "reasoning")


class ChatMessage(APIModel):
    """One turn of the conversation, in any shape OpenAI's or vLLM's clients send it (an assistant reply
    appended as the client library returned it included). Fields that cannot change what the model reads
    (``refusal``, an assistant turn's ``audio``, ``annotations``) are accepted and excluded from dumps."""

    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None  # a "tool" message: the call whose result it holds
    tool_calls: list[ToolCallInput] | None = None  # an "assistant" message: the calls it made
    function_call: FunctionCallInput | None = None  # the deprecated form of one call: refused when set
    reasoning_content: str | None = None  # vLLM's: the reasoning behind an assistant turn, for the template
    reasoning: str | None = None  # vLLM's later name for it (transformers gives templates either as both)
    refusal: str | None = Field(default=None, exclude=True)
    audio: dict[str, Any] | None = Field(default=None, exclude=True)  # an assistant turn's spoken reply, by id
    annotations: list[dict[str, Any]] | None = Field(default=None, exclude=True)  # url citations

    @model_validator(mode="after")
    def _a_turn_the_model_can_read(self) -> ChatMessage:
        """Refuse what cannot be rendered as it was meant, naming the field at fault: an unknown role, an
        assistant's field on another turn, a deprecated function_call, a part a text-only model cannot read,
        and a tool result that names no call (as OpenAI refuses it)."""
        if self.role not in CHAT_ROLES:
            raise InvalidRequestError(f"{quote_value(self.role)} is not a chat role; a message's role is one of "
                                      f"{', '.join(map(quote_value, CHAT_ROLES))}", param="role")
        if self.role != "assistant":
            misplaced = next((name for name in _ASSISTANT_FIELDS if getattr(self, name) is not None), None)
            if misplaced is not None:
                raise InvalidRequestError(f"only an assistant message carries {misplaced}; this message's role "
                                          f"is {quote_value(self.role)}", param=misplaced)
        if self.function_call is not None:
            raise InvalidRequestError("function_call, the deprecated form of a call, is not supported; send the "
                                      "call in tool_calls and its result as a 'tool' message", param="function_call")
        if isinstance(self.content, list):
            self._check_parts(self.content)
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidRequestError("a tool message must name the tool call it answers: give the id of a call "
                                      "from an earlier assistant message's tool_calls", param="tool_call_id")
        return self

    def _check_parts(self, parts: list[AnyPart]) -> None:
        for index, part in enumerate(parts):
            if isinstance(part, MediaContentPart):
                raise InvalidRequestError(f"this server reads text and image parts only, so it cannot read a part "
                                          f"of type {quote_value(part.type)}; send the content as text",
                                          param=f"content[{index}]")
            if isinstance(part, RefusalContentPart) and self.role != "assistant":
                raise InvalidRequestError("only an assistant message carries a refusal part",
                                          param=f"content[{index}]")

    @field_serializer("content")
    def _content_as_read(self, content: str | list[AnyPart] | None) -> str | list[dict[str, Any]] | None:
        """The content without refusal parts, which are not rendered: dumps (the response cache's key
        among them) hold only what the model reads."""
        if not isinstance(content, list):
            return content
        return [part.model_dump() for part in content if isinstance(part, (TextContentPart, ImageContentPart))]

    @property
    def image_parts(self) -> list[tuple[int, ImageContentPart]]:
        """The message's image parts, each with its index in the content."""
        if not isinstance(self.content, list):
            return []
        return [(index, part) for index, part in enumerate(self.content) if isinstance(part, ImageContentPart)]

    def as_template_input(self, content_format: Literal["string", "openai"] = "string") -> dict[str, Any]:
        """The mapping chat templates expect: role and content, plus ``name``, ``tool_call_id``,
        ``tool_calls`` and ``reasoning_content`` (or ``reasoning``) when given, for the templates that use
        them. The content is text (parts joined with newlines) in the "string" format, and a list of text
        and image parts in the "openai" format, for templates that loop over the parts themselves (an image
        part as transformers' templates read it, {"type": "image"}: its pixels travel beside the prompt)."""
        if isinstance(self.content, list):
            parts = [part for part in self.content if isinstance(part, (TextContentPart, ImageContentPart))]
        else:
            parts = [] if self.content is None else [TextContentPart(type="text", text=self.content)]
        content: str | list[dict[str, str]] = (
            "\n".join(part.text for part in parts if isinstance(part, TextContentPart))
            if content_format == "string"
            else [{"type": "text", "text": part.text} if isinstance(part, TextContentPart) else {"type": "image"}
                  for part in parts])
        message: dict[str, Any] = {"role": self.role, "content": content}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.tool_calls is not None:
            message["tool_calls"] = [_template_tool_call(call) for call in self.tool_calls]
        for name in ("reasoning_content", "reasoning"):
            if getattr(self, name) is not None:
                message[name] = getattr(self, name)
        return message


def check_tool_results_answer_calls(messages: list[ChatMessage]) -> None:
    """Each tool message must answer a call an earlier assistant message made, as OpenAI requires:
    a result the model never asked for would be rendered as if it had."""
    calls_made: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            calls_made.update(call.id for call in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in calls_made:
            raise InvalidRequestError(
                f"tool message answers tool call {quote_value(message.tool_call_id)}, which no earlier assistant "
                f"message's tool_calls holds; a tool message must follow the assistant message that made its call",
                param=f"messages[{index}].tool_call_id")


def check_continuation(continue_final_message: bool, add_generation_prompt: bool) -> None:
    """As vLLM: a reply continuing the last message cannot also start a new assistant turn."""
    if continue_final_message and add_generation_prompt:
        raise InvalidRequestError("continue_final_message continues the last message, and add_generation_prompt "
                                  "would start a new assistant turn after it; set add_generation_prompt to false",
                                  param="continue_final_message")


def _checked_processor_kwargs(cls: type, kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
    """A request's mm_processor_kwargs, checked as the setting of the same name is."""
    if kwargs is None:
        return None
    try:
        return check_image_processor_kwargs(kwargs)
    except ValueError as error:
        raise InvalidRequestError(str(error)) from None


def _template_tool_call(call: ToolCallInput) -> dict[str, Any]:
    """A call as chat templates read it: the arguments as a mapping (they write it out as JSON
    themselves), unless the text is not a JSON object, which is then passed on as it came."""
    try:
        arguments = json.loads(call.function.arguments)
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        arguments = call.function.arguments
    return {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": arguments}}


class ChatCompletionRequest(GenerationRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    add_generation_prompt: bool = True
    # vLLM's: the last message is left open for the model to continue (add_generation_prompt must then
    # be false), and extra variables for the chat template, which uses them or not.
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    # vLLM's: a template of the request's own, rendered only where the server trusts request templates.
    chat_template: str | None = None
    # Thinking tokens after which the end of thinking is forced and the answer follows (needs a reasoning
    # parser); vLLM's include_reasoning false leaves the thinking out of the reply.
    thinking_token_budget: int | None = Field(default=None, ge=0)
    include_reasoning: bool = True
    # vLLM's: the image processor's resizing bounds for this request's images, over the server's.
    mm_processor_kwargs: dict[str, Any] | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None  # None: OpenAI's default, true
    # OpenAI's fields that ask nothing of the model's output: accepted and not used.
    metadata: dict[str, str] | None = None
    prompt_cache_key: str | None = None  # the prefix cache needs no hint
    safety_identifier: str | None = None
    prompt_cache_options: dict[str, Any] | None = Field(default=None, exclude=True)  # the prefix cache needs none
    # OpenAI's fields this server does not implement: accepted only at values that ask for nothing.
    audio: dict[str, Any] | None = None
    function_call: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    modalities: list[str] | None = None
    moderation: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    prompt_cache_retention: str | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    verbosity: str | None = None
    web_search_options: dict[str, Any] | None = None

    _processor_kwargs = field_validator("mm_processor_kwargs")(_checked_processor_kwargs)

    @model_validator(mode="after")
    def _a_conversation_to_answer(self) -> ChatCompletionRequest:
        check_tool_results_answer_calls(self.messages)
        check_continuation(self.continue_final_message, self.add_generation_prompt)
        return self

    @property
    def allows_parallel_calls(self) -> bool:
        """OpenAI's default, when parallel_tool_calls is unset, is to allow them."""
        return self.parallel_tool_calls is not False


class TokenizeRequest(APIModel):
    """Either a prompt, or chat messages rendered with the model's chat template."""

    model: str | None = None
    prompt: str | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False  # as chat completions take them
    chat_template_kwargs: dict[str, Any] | None = None
    chat_template: str | None = None
    mm_processor_kwargs: dict[str, Any] | None = None

    _processor_kwargs = field_validator("mm_processor_kwargs")(_checked_processor_kwargs)

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise InvalidRequestError("give exactly one of 'prompt' or 'messages'")
        if self.messages is not None:
            check_tool_results_answer_calls(self.messages)
            check_continuation(self.continue_final_message, self.add_generation_prompt)
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
