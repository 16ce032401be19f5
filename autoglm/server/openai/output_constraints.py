"""The one constraint a request puts on its output, whichever field asks for it, and its grammar
compiled off the event loop.

OpenAI's ``response_format``, vLLM's ``structured_outputs`` and vLLM's older ``guided_*`` names all
ask for a StructuredOutputsParams; a request may use only one of them. Errors name the field the
request used: a bad schema sent as ``response_format`` is a 400 naming
``response_format.json_schema.schema``, not the engine's ``structured_outputs.json``.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from autoglm.engine.client import EngineClient
from autoglm.errors import InvalidRequestError
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import GenerationRequest
from autoglm.structured_outputs import StructuredOutputsParams

# The engine's (and vLLM's) name for a constraint, which its errors use.
ENGINE_FIELD = "structured_outputs"
# Compiling takes time in proportion to a grammar's size (a 400 kB regex of alternatives took 10 s of a
# core): past this the request is refused rather than held. The compile cannot be interrupted and ends
# on its own, into the cache, where a retry of the same constraint finds it.
GRAMMAR_COMPILE_TIMEOUT_S = 30.0
# vLLM's older request fields, each the StructuredOutputsParams field it sets.
GUIDED_FIELDS = {"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice",
                 "guided_grammar": "grammar"}


@dataclass(frozen=True)
class OutputConstraint:
    """A constraint and the request field that asked for it, which its errors name."""

    params: StructuredOutputsParams
    field: str

    @classmethod
    def from_request_field(cls, field: str, **constraint: Any) -> OutputConstraint:
        """The constraint `field` asks for; a bad one is a 400 naming `field`."""
        try:
            return cls(StructuredOutputsParams(**constraint), field)
        except InvalidRequestError as error:
            raise request_field_error(error, field) from None


def requested_constraint(request: GenerationRequest) -> OutputConstraint | None:
    """What the request's output must match; None for plain text. Two fields asking at once is a 400
    naming both: neither can be said to win."""
    asked = list(_each_constraint(request))
    if len(asked) > 1:
        first, second = asked[0].field, asked[1].field
        raise APIError(HTTPStatus.BAD_REQUEST, f"{first} and {second} both constrain the output; give only one "
                       f"of them", param=second, code="invalid_value")
    return asked[0] if asked else None


def _each_constraint(request: GenerationRequest) -> Iterator[OutputConstraint]:
    response_format = request.response_format
    if response_format is not None and response_format.type == "json_object":
        yield OutputConstraint.from_request_field("response_format", json_object=True)
    if response_format is not None and response_format.json_schema is not None:
        schema = response_format.json_schema.schema_
        # Without a schema OpenAI asks for JSON and nothing more: the empty schema, which any value matches.
        yield OutputConstraint.from_request_field("response_format.json_schema.schema",
                                                  json={} if schema is None else schema)
    if request.structured_outputs is not None:
        yield OutputConstraint.from_request_field(
            ENGINE_FIELD, **request.structured_outputs.model_dump(by_alias=True, exclude_none=True))
    for field, kind in GUIDED_FIELDS.items():
        value = getattr(request, field)
        if value is not None:
            yield OutputConstraint.from_request_field(field, **{kind: value})


def request_field_error(error: InvalidRequestError, field: str) -> APIError:
    """The 400 for a constraint the engine refused, naming `field` (the request's name for it) where
    the engine named its own: ``structured_outputs.regex must be ...`` becomes ``guided_regex must be ...``."""
    message, param = str(error), error.param or field
    if not field.startswith(ENGINE_FIELD):
        if error.param is not None and message.startswith(error.param):
            message = field + message[len(error.param):]
        else:
            message = f"{field}: {message}"
        param = field
    return APIError(HTTPStatus.BAD_REQUEST, message, param=param, code="invalid_value")


async def compile_grammar(engine: EngineClient, constraint: OutputConstraint | None,
                          timeout_s: float = GRAMMAR_COMPILE_TIMEOUT_S) -> None:
    """Compile the constraint's grammar (or find it in the engine's cache) on a worker thread: a big
    schema takes long enough to stall every connection if compiled on the event loop, and the engine
    thread would stall every running stream. A bad schema, regex or grammar is a 400 naming its field,
    and so is one that takes longer than ``timeout_s`` to compile."""
    if constraint is None:
        return
    try:
        await asyncio.wait_for(asyncio.to_thread(engine.compile_grammar, constraint.params), timeout_s)
    except InvalidRequestError as error:
        raise request_field_error(error, constraint.field) from None
    except asyncio.TimeoutError:
        field = constraint.field
        param = f"{ENGINE_FIELD}.{constraint.params.kind}" if field == ENGINE_FIELD else field
        raise APIError(HTTPStatus.BAD_REQUEST, f"{param} takes longer than {timeout_s:g} seconds to compile into a "
                       "grammar; give a smaller one", param=param, code="invalid_value") from None
