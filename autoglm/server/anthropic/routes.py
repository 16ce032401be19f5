"""POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's Messages API, served by the chat route.

A request is checked in Anthropic's terms (protocol.py), translated into the chat request it amounts to
(to_chat.py), and run by create_chat_completion with a builder of Anthropic's shapes (reply.py); its errors
take Anthropic's shape in error_shape.py.
"""
from __future__ import annotations

from functools import partial
from http import HTTPStatus

from fastapi import APIRouter, Request, Response

from autoglm.server.anthropic.protocol import CountTokensRequest, CountTokensResponse, MessagesRequest
from autoglm.server.anthropic.rendered_prompt import prompt_token_ids
from autoglm.server.anthropic.reply import MessageBuilder
from autoglm.server.anthropic.to_chat import chat_request, counting_request
from autoglm.server.anthropic.unsupported import MESSAGES_FIELDS_NOT_HONOURED
from autoglm.server.dependencies import State, allowed_model
from autoglm.server.openai.chat import create_chat_completion
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.generation import accept_generation
from autoglm.server.openai.unsupported import refuse_unimplemented
from autoglm.server.state import ServerState

router = APIRouter()


@router.post("/v1/messages")
async def create_message(body: MessagesRequest, raw: Request, state: ServerState = State) -> Response:
    refuse_unimplemented(body, MESSAGES_FIELDS_NOT_HONOURED)
    _check_thinking_is_read(body, state)
    chat = chat_request(body)
    accept_generation(raw, state, chat)
    return await create_chat_completion(raw, state, chat,
                                        partial(MessageBuilder, stop_sequences=body.stop_sequences or ()))


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, raw: Request, state: ServerState = State) -> CountTokensResponse:
    """The length of the prompt /v1/messages renders for the same fields; a key that may read a model may count."""
    chat = counting_request(body)
    chat.model = allowed_model(raw, state, chat.model, generates=False)
    return CountTokensResponse(input_tokens=len(await prompt_token_ids(state, state.route(chat.model), chat)))


def _check_thinking_is_read(body: MessagesRequest, state: ServerState) -> None:
    """Thinking asked for needs the server's reasoning parser, which splits it into thinking blocks and keeps its
    budget; without one it would come back as text, so it is refused, as Anthropic refuses it of a model that
    does not think."""
    if body.thinking is not None and body.thinking.type != "disabled" and state.chat_parsers.reasoning is None:
        raise APIError(HTTPStatus.BAD_REQUEST, f"thinking: this server does not read the model's thinking (it "
                       f"starts with --reasoning-parser NAME to do so), so it cannot answer thinking of type "
                       f"'{body.thinking.type}'; leave thinking out or send {{\"type\": \"disabled\"}}",
                       param="thinking", code="invalid_value")
