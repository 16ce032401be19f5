"""What a Responses request may ask that this server does not do, refused with a 400 naming where it is.

Built-in tools (web search, file search, code interpreter, MCP servers, ...) run on OpenAI's side, and
background mode, stored prompts, conversations and automatic truncation need machinery this server does
not have; an answer that silently went without them would not be the one asked for. Each field's
default asks for nothing, so clients that always send defaults are served.
"""
from __future__ import annotations

from http import HTTPStatus

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.unsupported import UnimplementedField, refuse_unimplemented
from autoglm.server.responses_api.protocol import (
    ContentPart,
    FunctionCallOutputItem,
    InputImage,
    MessageItem,
    ResponsesRequest,
    Unserved,
)

UNIMPLEMENTED_FIELDS = (
    UnimplementedField("background", (None, False)),
    UnimplementedField("truncation", (None, "disabled")),
    UnimplementedField("conversation", (None,)),  # previous_response_id carries a conversation on
    UnimplementedField("prompt", (None,)),
    UnimplementedField("context_management", (None, [])),
    UnimplementedField("top_logprobs", (None, 0)),
    UnimplementedField("service_tier", (None, "auto", "default")),
    UnimplementedField("stream_options.include_obfuscation", (None, False)),
    UnimplementedField("prompt_cache_retention", (None, "in_memory")),
    UnimplementedField("moderation", (None,)),
    UnimplementedField("text.verbosity", (None, "medium")),
)
# What `include` may ask for: the thinking in a form the client can send back (reasoning items always carry
# it here), and input images' URLs (kept as sent).
SERVED_INCLUDES = ("reasoning.encrypted_content", "message.input_image.image_url")
_ITEM_TYPES = "message, function_call, function_call_output and reasoning"
_PART_TYPES = "input_text, input_image, output_text and refusal"


def refuse_unsupported(body: ResponsesRequest) -> None:
    """Raise a 400 for the first thing `body` asks that this server does not serve."""
    refuse_unimplemented(body, UNIMPLEMENTED_FIELDS)
    for asked in body.include or []:
        if asked not in SERVED_INCLUDES:
            raise _unsupported("include", f"include holds {quote_value(asked)}, which this server cannot add; "
                               f"it serves {' and '.join(map(quote_value, SERVED_INCLUDES))}")
    for index, tool in enumerate(body.tools or []):
        if isinstance(tool, Unserved):
            raise _unsupported(f"tools[{index}].type", f"tools[{index}].type is {quote_value(tool.type)}, a built-in "
                               f"tool run on OpenAI's side; this server serves only function tools "
                               f"(\"type\": \"function\")")
    if isinstance(body.tool_choice, Unserved):
        raise _unsupported("tool_choice.type", f"tool_choice.type is {quote_value(body.tool_choice.type)}; this "
                           f"server serves tool_choice \"none\", \"auto\", \"required\" and "
                           f"{{\"type\": \"function\", \"name\": ...}}")
    for index, item in enumerate(body.input):
        if isinstance(item, Unserved):
            raise _unsupported(f"input[{index}].type", f"input[{index}].type is {quote_value(item.type)}; this "
                               f"server reads {_ITEM_TYPES} items")
        if isinstance(item, MessageItem):
            _refuse_parts(item.content, f"input[{index}].content")
        elif isinstance(item, FunctionCallOutputItem) and isinstance(item.output, list):
            _refuse_parts(item.output, f"input[{index}].output")


def _refuse_parts(parts: list[ContentPart], where: str) -> None:
    for index, part in enumerate(parts):
        at = f"{where}[{index}]"
        if isinstance(part, Unserved):
            raise _unsupported(f"{at}.type", f"{at}.type is {quote_value(part.type)}; this server reads "
                               f"{_PART_TYPES} parts (send a file's content as text)")
        if isinstance(part, InputImage) and part.file_id is not None:
            raise _unsupported(f"{at}.file_id", f"{at}.file_id: this server keeps no files to read images from; "
                               f"send the image as image_url, an http(s) URL or a data URL")
        if isinstance(part, InputImage) and part.image_url is None:
            raise APIError(HTTPStatus.BAD_REQUEST, f"{at}: an input_image needs its image_url, an http(s) URL or "
                           f"a data URL", param=f"{at}.image_url", code="missing_required_parameter")


def _unsupported(param: str, message: str) -> APIError:
    return APIError(HTTPStatus.BAD_REQUEST, message, param=param, code="unsupported_parameter")
