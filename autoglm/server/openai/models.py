"""GET /v1/models and /v1/models/{id}: the served models a key's tenant may use, as OpenAI lists them."""
from __future__ import annotations

from http import HTTPStatus

from fastapi import APIRouter, Request

from autoglm.errors import quote_value
from autoglm.server.dependencies import State, get_and_head
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.responses import ModelCard, ModelList
from autoglm.server.state import ServerState
from autoglm.server.tenants.access import may_use_model
from autoglm.server.versions.cards import model_cards
from autoglm.server.versions.routing import model_name_of

router = APIRouter()


@get_and_head(router, "/v1/models")
async def list_models(raw: Request, state: ServerState = State) -> ModelList:
    """Each served model the key's tenant may use: by name, and (from a registry) each loaded version with its
    aliases."""
    state.check_ready()
    return ModelList(data=_usable_cards(raw, state))


@get_and_head(router, "/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, raw: Request, state: ServerState = State) -> ModelCard:
    """One card of /v1/models by its id; a model the key's tenant may not use is as unknown as one not served."""
    state.check_ready()
    card = next((card for card in _usable_cards(raw, state) if card.id == model_id), None)
    if card is None:
        raise APIError(HTTPStatus.NOT_FOUND, f"the model {quote_value(model_id)} does not exist or you do not have "
                       f"access to it; GET /v1/models lists those you may use", param="model", code="model_not_found")
    return card


def _usable_cards(raw: Request, state: ServerState) -> list[ModelCard]:
    return [card for card in model_cards(state.router, state.created) if may_use_model(raw, model_name_of(card.id))]
