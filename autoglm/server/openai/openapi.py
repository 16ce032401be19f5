"""The OpenAPI document as the server really answers, so generated clients and schema fuzzers can trust it.

FastAPI documents each route from its signature: a 422 for invalid input that the server never
sends (install_error_handlers answers 400 in OpenAI's error shape), and a JSON body for every route
that returns a plain Response (/health has none off the CPU, /metrics is Prometheus text, the generation
routes stream server-sent events). This module rewrites those answers and adds the errors each
route can give, all in the error schema (Anthropic's, on the Messages API's routes).
"""
from __future__ import annotations

import functools
import warnings
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from autoglm.config import ServerConfig
from autoglm.server.anthropic.errors import AnthropicError, speaks_anthropic
from autoglm.server.anthropic.responses import MessageResponse
from autoglm.server.openai.errors import RETRY_AFTER_S, ErrorResponse
from autoglm.server.openai.responses import ChatCompletionChunk, ChatCompletionResponse, CompletionResponse
from autoglm.server.openai.schema_bounds import TOKEN_IDS, TOKENIZE_ONE_OF, request_field_bounds

_SCHEMA_REF = "#/components/schemas/{model}"
# FastAPI's schemas for the 422 it would document.
_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")

# When each error status is answered; the body's message says what exactly.
_ERROR_DESCRIPTIONS = {
    HTTPStatus.BAD_REQUEST: "Invalid request: the message names the parameter and what it allows",
    HTTPStatus.UNAUTHORIZED: "Keys are configured and the `Authorization: Bearer` (or `x-api-key`) key is missing, "
                             "unknown, revoked or expired",
    HTTPStatus.FORBIDDEN: "The key's role may not use this route, or its tenant may not use `model`",
    HTTPStatus.NOT_FOUND: "The model, version, LoRA adapter, key or stored response named does not exist here, or "
                          "the file or batch is not the key's tenant's",
    HTTPStatus.CONFLICT: "The version or adapter is loading or draining, is the stable or the canary, too many "
                         "versions are loaded, or there is nothing to roll back to; the batch has ended and cannot be cancelled",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "The request body is larger than the server accepts, or the uploaded file "
                                         "than max_file_bytes, or storing the file or response would pass the "
                                         "tenant's tenant_storage_bytes",
    HTTPStatus.UNPROCESSABLE_ENTITY: "The version failed to load, or its weight files no longer match the registry's "
                                     "checksum; the served versions are unchanged",
    HTTPStatus.TOO_MANY_REQUESTS: "The waiting queue is full; retry after `Retry-After` seconds",
    HTTPStatus.INTERNAL_SERVER_ERROR: "A bug in the server, whose log holds the traceback; it goes on serving",
    HTTPStatus.SERVICE_UNAVAILABLE: "The model is still loading, the server is draining, its engine loop stopped, "
                                    "its stored responses cannot be reached, or every LoRA adapter loaded is busy "
                                    "and max_cpu_loras leaves no room for another",
    HTTPStatus.NOT_IMPLEMENTED: "Files and batches, or loading and unloading LoRA adapters, on an application of "
                                "several Ray replicas, which would each keep their own",
    HTTPStatus.GATEWAY_TIMEOUT: "The request did not finish within the server's request_timeout_s",
}
_KEYED = (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)
_REQUEST_ERRORS = (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                   HTTPStatus.SERVICE_UNAVAILABLE)
_GENERATION_ERRORS = (*_REQUEST_ERRORS, HTTPStatus.TOO_MANY_REQUESTS, HTTPStatus.GATEWAY_TIMEOUT)
# Reading a tenant's file or batch: its key, the id; changing one (upload, delete, make, cancel) needs a role
# that may generate.
_STORED_READ_ERRORS = (HTTPStatus.BAD_REQUEST, HTTPStatus.UNAUTHORIZED, HTTPStatus.NOT_FOUND,
                       HTTPStatus.NOT_IMPLEMENTED)
_STORED_CHANGE_ERRORS = (*_STORED_READ_ERRORS, HTTPStatus.FORBIDDEN)
# A model admin operation on a version: its body, its key, the model or version, the version's state, its load.
_VERSION_OPERATION_ERRORS = (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.CONFLICT,
                             HTTPStatus.REQUEST_ENTITY_TOO_LARGE, HTTPStatus.UNPROCESSABLE_ENTITY)
# Loading or unloading a LoRA adapter: its body and path, its key, the adapter, the engine's room for it, one
# replica.
_LORA_OPERATION_ERRORS = (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          HTTPStatus.SERVICE_UNAVAILABLE, HTTPStatus.NOT_IMPLEMENTED)
# The errors each route can answer with, besides the 500 of a server bug that any route may give. The /admin
# routes exist only on a server with keys (tenants) or a registry (models).
ROUTE_ERRORS: dict[str, tuple[HTTPStatus, ...]] = {
    "/health": (HTTPStatus.SERVICE_UNAVAILABLE,),
    "/version": (),
    "/metrics": _KEYED,  # with metrics_require_key
    "/v1/models": (HTTPStatus.UNAUTHORIZED, HTTPStatus.SERVICE_UNAVAILABLE),
    "/v1/models/{model_id}": (HTTPStatus.UNAUTHORIZED, HTTPStatus.NOT_FOUND, HTTPStatus.SERVICE_UNAVAILABLE),
    "/tokenizer_info": (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND,
                        HTTPStatus.SERVICE_UNAVAILABLE),
    "/tokenize": _REQUEST_ERRORS,
    "/detokenize": _REQUEST_ERRORS,
    "/v1/completions": _GENERATION_ERRORS,
    "/v1/chat/completions": _GENERATION_ERRORS,
    "/v1/responses": _GENERATION_ERRORS,
    "/v1/responses/{response_id}": (*_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.SERVICE_UNAVAILABLE),
    "/v1/responses/{response_id}/input_items": (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND,
                                                HTTPStatus.SERVICE_UNAVAILABLE),
    "/v1/messages": _GENERATION_ERRORS,
    "/v1/embeddings": _GENERATION_ERRORS,
    "/v1/rerank": _GENERATION_ERRORS,
    "/v2/rerank": _GENERATION_ERRORS,
    "/rerank": _GENERATION_ERRORS,
    "/v1/score": _GENERATION_ERRORS,
    "/score": _GENERATION_ERRORS,
    "/v1/messages/count_tokens": _REQUEST_ERRORS,
    "/v1/files": (*_STORED_CHANGE_ERRORS, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    "/v1/files/{file_id}": _STORED_CHANGE_ERRORS,
    "/v1/files/{file_id}/content": _STORED_READ_ERRORS,
    "/v1/batches": (*_STORED_CHANGE_ERRORS, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    "/v1/batches/{batch_id}": _STORED_READ_ERRORS,
    "/v1/batches/{batch_id}/cancel": (*_STORED_CHANGE_ERRORS, HTTPStatus.CONFLICT),
    "/v1/load_lora_adapter": (*_LORA_OPERATION_ERRORS, HTTPStatus.CONFLICT),
    "/v1/unload_lora_adapter": _LORA_OPERATION_ERRORS,
    "/admin/tenants": _KEYED,
    "/admin/usage": (HTTPStatus.UNAUTHORIZED,),
    "/admin/reload": (HTTPStatus.BAD_REQUEST, *_KEYED),
    "/admin/keys/{key_id}/revoke": (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND),
    "/admin/models": _KEYED,
    "/admin/models/{name}/load": _VERSION_OPERATION_ERRORS,
    "/admin/models/{name}/unload": (HTTPStatus.BAD_REQUEST, *_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.CONFLICT,
                                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    "/admin/models/{name}/promote": _VERSION_OPERATION_ERRORS,
    "/admin/models/{name}/rollback": (*_KEYED, HTTPStatus.NOT_FOUND, HTTPStatus.CONFLICT,
                                      HTTPStatus.UNPROCESSABLE_ENTITY),
    "/admin/models/{name}/canary": _VERSION_OPERATION_ERRORS,
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _SCHEMA_REF.format(model=model.__name__)}


def _generation_answer(what: str, response: type[BaseModel], chunk: type[BaseModel]) -> dict[str, Any]:
    events = f"Server-sent events: `data: <{chunk.__name__} JSON>` lines, then `data: [DONE]`"
    return {"description": f"The {what}; with `stream: true`, server-sent events of its chunks",
            "content": {"application/json": {"schema": _ref(response)},
                        "text/event-stream": {"schema": {"type": "string", "description": events}}}}


# The success answers FastAPI cannot read from a route that returns a plain Response.
_SUCCESS_ANSWERS: dict[str, dict[str, Any]] = {
    "/health": {"description": "The server takes requests. On the CPU, where the compiled kernels stand "
                               "(no body elsewhere)",
                "content": {"application/json": {"schema": {"type": "object", "properties": {"cpu_kernels": {
                    "type": "string",
                    "description": "`building (about 70 s, started 12 s ago)`, `ready` or `unavailable: <why>`; "
                                   "plain PyTorch serves until `ready`"}}}}}},
    "/metrics": {"description": "Prometheus text exposition format",
                 "content": {"text/plain": {"schema": {"type": "string"}}}},
    "/v1/completions": _generation_answer("completion", CompletionResponse, CompletionResponse),
    "/v1/chat/completions": _generation_answer("chat completion", ChatCompletionResponse, ChatCompletionChunk),
    "/v1/messages": {
        "description": "The message; with `stream: true`, server-sent events named as Anthropic names them",
        "content": {"application/json": {"schema": _ref(MessageResponse)},
                    "text/event-stream": {"schema": {"type": "string", "description": (
                        "`event: message_start`, `ping`, then per content block `content_block_start`, "
                        "`content_block_delta`s and `content_block_stop`, then `message_delta` and `message_stop`; "
                        "`event: error` with an error body on a failure")}}}},
    "/v1/load_lora_adapter": {"description": "The adapter is served under `lora_name` (or already was)",
                              "content": {"text/plain": {"schema": {"type": "string"}}}},
    "/v1/unload_lora_adapter": {"description": "The adapter's last requests have ended and it is unloaded",
                                "content": {"text/plain": {"schema": {"type": "string"}}}},
    "/v1/files/{file_id}/content": {"description": "The file's bytes: JSONL, one request or result a line",
                                    "content": {"application/jsonl": {"schema": {"type": "string",
                                                                                 "format": "binary"}}}},
}
# The request bodies whose fields' ranges schema_bounds states.
_BOUNDED_REQUESTS = ("CompletionRequest", "ChatCompletionRequest")
# Models the rewritten answers refer to, which FastAPI does not see in any route's signature.
_ANSWER_MODELS: tuple[type[BaseModel], ...] = (ErrorResponse, CompletionResponse, ChatCompletionResponse,
                                               ChatCompletionChunk, AnthropicError, MessageResponse)


def install_openapi(app: FastAPI, config: ServerConfig) -> None:
    """Serve the rewritten document at /openapi.json (and so in /docs), built once on first use."""
    fastapi_document = app.openapi

    @functools.cache
    def document() -> dict[str, Any]:
        with warnings.catch_warnings():  # the ids of a route of several methods, made unique below
            warnings.filterwarnings("ignore", "Duplicate Operation ID", UserWarning)
            described = _describe_answers(fastapi_document())
        _state_bounds(described, request_field_bounds(config.engine.scheduler.max_abs_priority))
        return described

    app.openapi = document  # type: ignore[method-assign]


def _describe_answers(document: dict[str, Any]) -> dict[str, Any]:
    """Rewrite FastAPI's `document` in place to give each operation the answers the server sends."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    _, answer_schemas = models_json_schema([(model, "serialization") for model in _ANSWER_MODELS],
                                           ref_template=_SCHEMA_REF)
    for name, schema in answer_schemas["$defs"].items():
        schemas.setdefault(name, schema)
    for path, operations in document["paths"].items():
        operations.pop("head", None)  # every GET answers HEAD too; a HEAD operation would only repeat it
        for method, operation in operations.items():
            if len(operations) > 1:  # FastAPI gives every method of one route the id it ends with its first
                operation["operationId"] = f"{operation['operationId'].rsplit('_', 1)[0]}_{method}"
            answers = operation["responses"]
            answers.pop(str(HTTPStatus.UNPROCESSABLE_ENTITY.value), None)
            if path in _SUCCESS_ANSWERS:
                answers[str(HTTPStatus.OK.value)] = _SUCCESS_ANSWERS[path]
            error_model = AnthropicError if speaks_anthropic(path) else ErrorResponse  # each API's own shape
            for status in (*ROUTE_ERRORS.get(path, ()), HTTPStatus.INTERNAL_SERVER_ERROR):
                answers[str(status.value)] = _error_answer(status, error_model)
    return document


def _state_bounds(document: dict[str, Any], bounds: dict[str, dict[str, Any]]) -> None:
    """Add to the request bodies' fields the ranges and rules the server checks beyond their types."""
    schemas = document["components"]["schemas"]
    for name in _BOUNDED_REQUESTS:
        properties = schemas[name]["properties"]
        for field, keywords in bounds.items():
            if field in properties:
                properties[field].update(keywords)
    schemas["TokenizeRequest"]["oneOf"] = TOKENIZE_ONE_OF
    schemas["DetokenizeRequest"]["properties"]["tokens"].update(TOKEN_IDS)


def _error_answer(status: HTTPStatus, error_model: type[BaseModel]) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": _ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": _ref(error_model)}},
    }
    if status == HTTPStatus.TOO_MANY_REQUESTS:
        answer["headers"] = {"Retry-After": {"description": f"Seconds to wait before retrying ({RETRY_AFTER_S})",
                                             "schema": {"type": "integer"}}}
    return answer
