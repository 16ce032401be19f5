"""A tenant's stored responses: kept, read back, deleted, their conversations followed, held to its quota.

A record is the Response as it was answered and the request's input items; a later request naming it in
previous_response_id continues the conversation of the whole chain: each predecessor's input and output
items, oldest first (instructions are not carried over, as OpenAI's are not). A tenant reaches only its
own records: another's id is as unknown as a made-up one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from autoglm.config import ConfigError, ServerConfig
from autoglm.config.server import StorageConfig
from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.responses_api.items import read_items
from autoglm.server.responses_api.objects import ResponseObject
from autoglm.server.responses_api.protocol import InputItem
from autoglm.server.responses_api.sqlite_store import FILE_NAME, SqliteResponseStore
from autoglm.server.responses_api.store import SECONDS_PER_DAY, ResponseStore
from autoglm.server.tenants.rate_limit_storage import REDIS_EXTRA

SQLITE = "sqlite"


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]  # the Response, as answered
    input_items: list[dict[str, Any]]  # the request's input, each item with its id

    @property
    def previous_response_id(self) -> str | None:
        return self.response["previous_response_id"]

    @property
    def conversation_items(self) -> list[dict[str, Any]]:
        """What this response adds to its conversation: its input, then its output."""
        return self.input_items + self.response["output"]

    def encode(self) -> bytes:
        return json.dumps({"response": self.response, "input_items": self.input_items},
                          ensure_ascii=False).encode()

    @classmethod
    def decode(cls, record: bytes) -> StoredResponse:
        fields = json.loads(record)
        return cls(fields["response"], fields["input_items"])


class StoredResponses:
    """The responses every tenant keeps in `store`, each tenant's within `quota_bytes`."""

    def __init__(self, store: ResponseStore, quota_bytes: int) -> None:
        self.store = store
        self.quota_bytes = quota_bytes

    async def keep(self, tenant: str, response: ResponseObject, input_items: list[dict[str, Any]]) -> None:
        stored = StoredResponse(response.model_dump(mode="json"), input_items)
        await self.store.put(tenant, response.id, stored.encode())

    async def get(self, tenant: str, response_id: str) -> StoredResponse:
        """The response; 404 where `tenant` keeps none by that id."""
        record = await self.store.get(tenant, response_id)
        if record is None:
            raise _not_found(response_id)
        return StoredResponse.decode(record)

    async def delete(self, tenant: str, response_id: str) -> None:
        if not await self.store.delete(tenant, response_id):
            raise _not_found(response_id)

    async def conversation(self, tenant: str, previous_response_id: str) -> list[InputItem]:
        """The items of the conversation up to and with `previous_response_id`, oldest first; a 400 where it,
        or a response its conversation goes back through, is not stored (any more)."""
        items: list[dict[str, Any]] = []
        response_id: str | None = previous_response_id
        while response_id is not None:
            record = await self.store.get(tenant, response_id)
            if record is None:
                raise _previous_not_found(response_id, previous_response_id)
            stored = StoredResponse.decode(record)
            items = stored.conversation_items + items
            response_id = stored.previous_response_id
        return read_items(items)

    async def check_room(self, tenant: str, input_items: list[dict[str, Any]]) -> None:
        """A 413 where `tenant`'s stored responses and this request's input would not fit its quota. The answer
        is stored once it is written, so a tenant may pass its quota by the answers of the requests it
        has running."""
        used = await self.store.used_bytes(tenant)
        asked = len(json.dumps(input_items, ensure_ascii=False).encode())
        if used + asked > self.quota_bytes:
            whose = f"tenant {quote_value(tenant)}'s" if tenant else "the"
            raise APIError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           f"{whose} stored responses take {used} bytes, and storing this one's input ({asked} "
                           f"bytes) would pass the tenant_storage_bytes quota of {self.quota_bytes}; delete stored "
                           f"responses (DELETE /v1/responses/ID) or send 'store': false",
                           param="store", code="storage_quota_exceeded")

    async def close(self) -> None:
        await self.store.close()


def open_store(storage: StorageConfig) -> ResponseStore:
    """The store the responses_store setting names; a Redis URL without its client stops the start."""
    retention_s = storage.storage_retention_days * SECONDS_PER_DAY
    if storage.responses_store == SQLITE:
        return SqliteResponseStore(storage.folder() / FILE_NAME, retention_s)
    try:
        from autoglm.server.responses_api.redis_store import RedisResponseStore
    except ImportError as error:
        raise ConfigError(f"responses_store is a Redis URL, but its client cannot be loaded ({error}); install it "
                          f"with: pip install '{REDIS_EXTRA}'") from None
    return RedisResponseStore(storage.responses_store, retention_s)


def check_shared_store(config: ServerConfig, param: str) -> None:
    """A 400 for a request that stores or reads stored responses (`param` says which) on Ray with several
    replicas and the SQLite store: each replica would keep its own, and the next turn may reach another."""
    most = config.ray.ray_max_replicas
    if most > 1 and config.storage.responses_store == SQLITE:
        raise APIError(HTTPStatus.BAD_REQUEST,
                       f"{param} needs stored responses, which this server, on Ray with up to {most} replicas "
                       f"(ray_max_replicas), keeps in each replica's own SQLite file, where the next request may "
                       f"not find them; set responses_store: redis://HOST:PORT[/DB], which every replica shares, "
                       f"or send 'store': false without previous_response_id", param=param,
                       code="unsupported_parameter")


def _not_found(response_id: str) -> APIError:
    return APIError(HTTPStatus.NOT_FOUND, f"Response with id {quote_value(response_id)} not found.",
                    param="response_id", code="response_not_found")


def _previous_not_found(response_id: str, previous_response_id: str) -> APIError:
    if response_id == previous_response_id:
        message = f"Previous response with id {quote_value(response_id)} not found."
    else:
        message = (f"Previous response with id {quote_value(response_id)} not found: the conversation of "
                   f"{quote_value(previous_response_id)} goes back through it, and it is no longer stored "
                   f"(deleted, or past storage_retention_days)")
    return APIError(HTTPStatus.BAD_REQUEST, message, param="previous_response_id",
                    code="previous_response_not_found")
