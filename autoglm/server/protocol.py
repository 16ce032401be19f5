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

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from autoglm.engine.llm_engine import Prompt
from autoglm.errors import InvalidRequestError, quote_value

# The pydantic error type of a field the request model does not declare.
UNKNOWN_FIELD = "unknown_field"
# The pydantic error type of text holding a lone surrogate (JSON's "\ud800"): JSON can spell one,
# but it is not Unicode text, so no tokenizer can read it and no UTF-8 answer can quote it.
INVALID_TEXT = "invalid_text"
_SURROGATE = re.compile("[\ud800-\udfff]")
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


class ChatMessage(APIModel):
    role: str
    content: str | list[TextContentPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None  # a "tool" message: the call whose result it holds
    tool_calls: list[ToolCallInput] | None = None  # an "assistant" message: the calls it made

    @model_validator(mode="after")
    def _tool_result_names_its_call(self) -> ChatMessage:
        """A result the model could not match to a call is refused, as OpenAI refuses it."""
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidRequestError("a tool message must name the tool call it answers: give the id of a call "
                                      "from an earlier assistant message's tool_calls", param="tool_call_id")
        return self

    def as_template_input(self) -> dict[str, Any]:
        """The mapping chat templates expect: role and content (text parts joined with newlines), plus
        ``name``, ``tool_call_id`` and ``tool_calls`` when given, for the templates that use them."""
        if isinstance(self.content, list):
            text = "\n".join(part.text for part in self.content)
        else:
            text = self.content or ""
        message: dict[str, Any] = {"role": self.role, "content": text}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.tool_calls is not None:
            message["tool_calls"] = [_template_tool_call(call) for call in self.tool_calls]
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
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None  # None: OpenAI's default, true
    # OpenAI's fields that ask nothing of the model's output: accepted and not used.
    metadata: dict[str, str] | None = None
    prompt_cache_key: str | None = None  # the prefix cache needs no hint
    safety_identifier: str | None = None
    # OpenAI's fields this server does not implement: accepted only at values that ask for nothing.
    audio: dict[str, Any] | None = None
    function_call: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    modalities: list[str] | None = None
    prediction: dict[str, Any] | None = None
    prompt_cache_retention: str | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    verbosity: str | None = None
    web_search_options: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _tool_results_answer_calls(self) -> ChatCompletionRequest:
        check_tool_results_answer_calls(self.messages)
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

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise InvalidRequestError("give exactly one of 'prompt' or 'messages'")
        if self.messages is not None:
            check_tool_results_answer_calls(self.messages)
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
