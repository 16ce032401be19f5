"""POST /v1/responses, and GET, DELETE and the input items of a stored response.

A request is translated into a chat request (to_chat.py) and served by the chat route with this API's
reply builder (reply.py); with ``store`` (the default) its Response is kept once complete: before a
whole answer is sent, or before a stream's last events are, so that a client's next turn finds it.
Every route speaks for the key's tenant and needs a role that may generate.
"""
from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Literal

from fastapi import APIRouter, FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse

from autoglm.server.dependencies import State, get_and_head
from autoglm.server.openai.chat import ChatReplyContext, create_chat_completion
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.generation import accept_generation
from autoglm.server.openai.streaming import EventStreamResponse
from autoglm.server.responses_api.error_names import in_responses_terms
from autoglm.server.responses_api.input_items import input_item_page
from autoglm.server.responses_api.items import dump_items, with_ids
from autoglm.server.responses_api.objects import DeletedResponse, InputItemList, RequestEcho, ResponseObject
from autoglm.server.responses_api.protocol import ResponsesRequest
from autoglm.server.responses_api.reply import ENCRYPTED_THINKING, ResponsesReply, request_echo
from autoglm.server.responses_api.stored import StoredResponses, check_shared_store, open_store
from autoglm.server.responses_api.to_chat import chat_request
from autoglm.server.responses_api.unsupported import refuse_unsupported
from autoglm.server.state import ServerState
from autoglm.server.tenants.access import check_access, request_principal

# Where the app keeps its StoredResponses (app.state), opened with the server and closed with it.
STORED_RESPONSES_STATE = "stored_responses"
# One event of a stream, as OpenAPI before 3.2 describes each: its name, and its data, a JSON object.
STREAM_EVENT = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"type": "string", "description": "The event's type: `response.created`, `response.output_text.delta`, "
                                               "..., `response.completed`"},
    "data": {"type": "string", "description": "The event as JSON, with its `type` and `sequence_number`"}}}


@contextlib.asynccontextmanager
async def _stored_responses_open(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.server
    responses = StoredResponses(open_store(state.config.storage), state.config.storage.tenant_storage_bytes)
    setattr(app.state, STORED_RESPONSES_STATE, responses)
    yield
    await responses.close()


router = APIRouter(lifespan=_stored_responses_open)


def stored_responses(raw: Request) -> StoredResponses:
    return getattr(raw.app.state, STORED_RESPONSES_STATE)


def tenant_of(raw: Request) -> str:
    """The key's tenant; "" on a server without keys, where every client shares one store."""
    principal = request_principal(raw)
    return principal.tenant.id if principal is not None else ""


@router.post("/v1/responses", response_model=ResponseObject,
             responses={200: {"content": {"text/event-stream": {"schema": STREAM_EVENT}}}})
async def create_response(body: ResponsesRequest, raw: Request, state: ServerState = State) -> Response:
    accept_generation(raw, state, body)
    refuse_unsupported(body)
    responses, tenant = stored_responses(raw), tenant_of(raw)
    if body.keeps or body.previous_response_id is not None:
        check_shared_store(state.config, "store" if body.keeps else "previous_response_id")
    history = (await responses.conversation(tenant, body.previous_response_id)
               if body.previous_response_id is not None else [])
    input_items = dump_items(with_ids(body.input))
    if body.keeps:
        await responses.check_room(tenant, input_items)
    translation = chat_request(body, history, reads_thinking=state.chat_parsers.reasoning is not None)
    replies = _Replies(request_echo(body), ENCRYPTED_THINKING in (body.include or []))
    try:
        answer = await create_chat_completion(raw, state, translation.request, replies)
    except APIError as error:
        raise in_responses_terms(error, translation.content_paths) from None
    reply = replies.made
    if not body.keeps or reply is None:
        return answer

    async def keep(response: ResponseObject) -> None:
        await responses.keep(tenant, response, input_items)

    if isinstance(answer, EventStreamResponse):
        return EventStreamResponse(_kept_when_done(answer.body_iterator, reply, keep), dict(answer.headers))
    if reply.finished is not None:  # None: the client went away before the answer was complete
        await keep(reply.finished)
    return answer


@router.api_route("/v1/responses/{response_id}", methods=["GET", "HEAD", "DELETE"],
                  response_model=ResponseObject | DeletedResponse)
async def stored_response(response_id: str, raw: Request) -> JSONResponse:
    """GET (and HEAD): the stored Response; DELETE: delete it. One route, so that a 405's Allow names all three."""
    check_access(raw, None, generates=True)
    responses, tenant = stored_responses(raw), tenant_of(raw)
    if raw.method == "DELETE":
        await responses.delete(tenant, response_id)
        return JSONResponse(DeletedResponse(id=response_id).model_dump())
    return JSONResponse((await responses.get(tenant, response_id)).response)


@get_and_head(router, "/v1/responses/{response_id}/input_items")
async def list_input_items(response_id: str, raw: Request, limit: int = Query(20, ge=1, le=100),
                           order: Literal["asc", "desc"] = "desc", after: str | None = None) -> InputItemList:
    """A page of the response's own input items (not its predecessors'), newest first by default."""
    check_access(raw, None, generates=True)
    stored = await stored_responses(raw).get(tenant_of(raw), response_id)
    return input_item_page(stored.input_items, limit, order, after)


class _Replies:
    """Makes the request's reply builder when the chat route asks for it, and holds it for the route."""

    def __init__(self, echo: RequestEcho, shows_encrypted: bool) -> None:
        self._echo = echo
        self._shows_encrypted = shows_encrypted
        self.made: ResponsesReply | None = None

    def __call__(self, context: ChatReplyContext) -> ResponsesReply:
        self.made = ResponsesReply(context, self._echo, self._shows_encrypted)
        return self.made


async def _kept_when_done(events: AsyncGenerator[str, None], reply: ResponsesReply,
                          keep: Callable[[ResponseObject], Awaitable[None]]) -> AsyncGenerator[str, None]:
    """The stream's events, the Response kept before its closing ones go out (the builder has it by then);
    a store that fails ends the stream as failed instead."""
    kept = False
    try:
        async for event in events:
            if reply.finished is not None and not kept:
                try:
                    await keep(reply.finished)
                except APIError as error:
                    for failure in reply.error_events(error):
                        yield failure
                    return
                kept = True
            yield event
    finally:
        await events.aclose()
