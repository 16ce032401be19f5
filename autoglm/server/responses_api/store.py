"""Where stored responses are kept: the interface the SQLite and Redis stores share.

A store holds opaque records (stored.py writes and reads them) by tenant and response id, each deleted
once it has been kept for the retention period, and says how many bytes a tenant's records take. A
store that cannot be reached answers 503: unlike the response cache, what it keeps cannot be skipped.
"""
from __future__ import annotations

from http import HTTPStatus
from typing import Protocol

from autoglm.server.openai.errors import APIError

SECONDS_PER_DAY = 86_400


class ResponseStore(Protocol):
    async def put(self, tenant: str, response_id: str, record: bytes) -> None:
        """Keep `record`, for the retention period from now."""

    async def get(self, tenant: str, response_id: str) -> bytes | None:
        """The record, or None where `tenant` has none by that id (another tenant's included) or it expired."""

    async def delete(self, tenant: str, response_id: str) -> bool:
        """Whether `tenant` had the record, which is gone now."""

    async def used_bytes(self, tenant: str) -> int:
        """The bytes of `tenant`'s records that have not expired."""

    async def close(self) -> None: ...


def store_unavailable() -> APIError:
    """The 503 of a store that failed; the server's log says why (it may name places clients need not know)."""
    return APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the server cannot reach its stored responses now; its log says "
                    "why; retry later, or send 'store': false without previous_response_id",
                    code="responses_store_unavailable")
