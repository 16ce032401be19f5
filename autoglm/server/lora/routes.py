"""POST /v1/load_lora_adapter and /v1/unload_lora_adapter: vLLM's routes and bodies, for an admin key (or, on a
server without keys, a client on this machine), answered as vLLM answers them."""
from __future__ import annotations

from http import HTTPStatus

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from pydantic import Field

from autoglm.errors import LoRAAdapterError, LoRAAdapterNotFoundError
from autoglm.server.dependencies import State
from autoglm.server.lora.adapter_paths import allowed_adapter_folder
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import APIModel
from autoglm.server.state import ServerState
from autoglm.server.versions.admin_routes import check_model_admin

router = APIRouter()


def check_admin_of_one_replica(raw: Request) -> None:
    """An admin's route (see check_model_admin); a 501 on an application of several replicas, where a runtime
    adapter would be loaded into one replica's engine alone."""
    check_model_admin(raw)
    if not raw.app.state.single_replica:
        raise APIError(HTTPStatus.NOT_IMPLEMENTED, "an adapter loaded at runtime would live in the engine of the one "
                       "replica the request reaches, and this application runs several (ray_max_replicas above 1); "
                       "serve adapters with lora_modules, which every replica loads", code="adapters_need_one_replica")


class LoadLoRAAdapterRequest(APIModel):
    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadLoRAAdapterRequest(APIModel):
    lora_name: str = Field(min_length=1)


@router.post("/v1/load_lora_adapter", response_class=PlainTextResponse)
async def load_lora_adapter(body: LoadLoRAAdapterRequest, raw: Request, state: ServerState = State) -> str:
    """Load an adapter from under allowed_lora_path and serve it as `lora_name`; loading the same one again
    changes nothing. Past max_cpu_loras the engine evicts its least recently used idle adapter (503 if all are
    busy)."""
    check_admin_of_one_replica(raw)
    state.check_ready()
    state.adapters.check_enabled()
    folder = allowed_adapter_folder(body.lora_path, state.config.adapters.allowed_lora_path)
    try:
        added = await state.adapters.load(body.lora_name, folder)
    except LoRAAdapterNotFoundError as error:
        raise APIError(HTTPStatus.NOT_FOUND, str(error), param="lora_path", code="lora_adapter_not_found") from None
    except LoRAAdapterError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, str(error), param="lora_path", code="invalid_lora_adapter") from None
    if not added:
        return f"Success: LoRA adapter '{body.lora_name}' is already loaded from {folder}."
    return f"Success: LoRA adapter '{body.lora_name}' added successfully."


@router.post("/v1/unload_lora_adapter", response_class=PlainTextResponse)
async def unload_lora_adapter(body: UnloadLoRAAdapterRequest, raw: Request, state: ServerState = State) -> str:
    """Stop serving an adapter: new requests for it are refused (404) at once, those running finish, then it
    unloads and this answers."""
    check_admin_of_one_replica(raw)
    state.check_ready()
    await state.adapters.unload(body.lora_name)
    return f"Success: LoRA adapter '{body.lora_name}' removed successfully."
