"""OpenAI request fields the server does not implement yet: accepted at values that ask for nothing, refused otherwise.

A client that sets such a field expects it to shape the answer; ignoring it would hand back an
answer the client did not ask for. Its default (no tools, plain-text format, ...) changes nothing,
so clients that always send defaults keep working.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel

from autoglm.server.openai.errors import APIError


@dataclass(frozen=True)
class UnimplementedField:
    path: str  # as the request names it, dotted inside an object
    harmless: tuple[Any, ...]  # the values that ask for nothing beyond what the server does anyway

    def allowed(self) -> str:
        *others, last = [json.dumps(value) for value in self.harmless]
        return f"{', '.join(others)} or {last}" if others else last


UNIMPLEMENTED_FIELDS = (
    UnimplementedField("suffix", (None, "")),
    UnimplementedField("stream_options.include_obfuscation", (None, False)),
    UnimplementedField("guided_decoding_backend", (None, "auto", "xgrammar")),  # xgrammar is the one we use
    UnimplementedField("guided_whitespace_pattern", (None,)),
    UnimplementedField("audio", (None,)),
    UnimplementedField("function_call", (None, "none", "auto")),  # "auto" with no functions is "none"
    UnimplementedField("functions", (None, [])),
    UnimplementedField("modalities", (None, [], ["text"])),  # no modality named: text, as always
    UnimplementedField("moderation", (None,)),
    UnimplementedField("prediction", (None,)),
    UnimplementedField("prompt_cache_retention", (None, "in_memory")),
    UnimplementedField("reasoning_effort", (None,)),
    UnimplementedField("service_tier", (None, "auto", "default")),
    UnimplementedField("store", (None, False)),
    UnimplementedField("verbosity", (None, "medium")),
    UnimplementedField("web_search_options", (None,)),
)

_ABSENT = object()


def refuse_unimplemented(request: BaseModel, fields: tuple[UnimplementedField, ...] = UNIMPLEMENTED_FIELDS) -> None:
    """Raise a 400 naming the first unimplemented field of `fields` (OpenAI's, unless another API names its own)
    set to a value that would change the answer."""
    for field in fields:
        value = _lookup(request, field.path)
        if value is not _ABSENT and value not in field.harmless:
            raise APIError(HTTPStatus.BAD_REQUEST,
                           f"{field.path} is not supported yet by this server; it accepts only {field.allowed()}",
                           param=field.path, code="unsupported_parameter")


def _lookup(request: BaseModel, path: str) -> Any:
    """The value at `path`; None under an unset object; _ABSENT where this request has no such field."""
    value: Any = request
    for name in path.split("."):
        if value is None:
            return None
        value = getattr(value, name, _ABSENT)
        if value is _ABSENT:
            return _ABSENT
    return value
