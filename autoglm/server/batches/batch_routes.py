"""/v1/batches: a tenant's batches, made from an uploaded file, read back, listed and cancelled.

Making a batch only records it; the runner reads its file and runs its lines. A tenant reaches only
its own batches: another's id is as unknown as one that never was.
"""
from __future__ import annotations

import asyncio
from http import HTTPStatus

from fastapi import APIRouter, Query, Request

from autoglm.errors import quote_value
from autoglm.server.batches.file_routes import BATCH_PURPOSE, file_not_found
from autoglm.server.batches.ids import new_batch_id
from autoglm.server.batches.objects import BatchList, BatchObject, batch_list, batch_object
from autoglm.server.batches.owners import check_may_change, request_owner
from autoglm.server.batches.records import BatchRecord, BatchStatus
from autoglm.server.batches.service import BatchService, Service
from autoglm.server.dependencies import get_and_head
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import APIModel

router = APIRouter()

# The one completion window OpenAI offers, and how long it is.
COMPLETION_WINDOW = "24h"
COMPLETION_WINDOW_S = 24 * 3600
# OpenAI's bounds of a batch's metadata, and of a page of batches.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
MAX_BATCHES_PER_PAGE = 100
DEFAULT_BATCHES_PER_PAGE = 20


class BatchRequest(APIModel):
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None


def batch_not_found(batch_id: str, param: str | None = None) -> APIError:
    return APIError(HTTPStatus.NOT_FOUND, f"No such Batch object: {quote_value(batch_id)}", param=param,
                    code="batch_not_found")


@router.post("/v1/batches", response_model=BatchObject)
async def create_batch(body: BatchRequest, raw: Request, service: BatchService = Service) -> BatchObject:
    check_may_change(raw)
    owner = request_owner(raw)
    if body.completion_window != COMPLETION_WINDOW:
        raise APIError(HTTPStatus.BAD_REQUEST, f"completion_window {quote_value(body.completion_window)} is not "
                       f"offered; allowed: '{COMPLETION_WINDOW}'", param="completion_window", code="invalid_value")
    problem = service.endpoints.problem(body.endpoint)
    if problem is not None:
        raise APIError(HTTPStatus.BAD_REQUEST, f"endpoint {problem.message}", param="endpoint", code=problem.code)
    _check_metadata(body.metadata)
    store = service.storage.store()
    input_file = await asyncio.to_thread(store.file, owner.tenant, body.input_file_id)
    if input_file is None:
        raise file_not_found(body.input_file_id, "input_file_id")
    if input_file.purpose != BATCH_PURPOSE:
        raise APIError(HTTPStatus.BAD_REQUEST, f"the file {body.input_file_id} has purpose '{input_file.purpose}'; "
                       f"a batch reads a file uploaded with purpose '{BATCH_PURPOSE}'", param="input_file_id",
                       code="invalid_value")
    now = service.now()
    record = BatchRecord(id=new_batch_id(), owner=owner.tenant, key_id=owner.key_id, endpoint=body.endpoint,
                         input_file_id=body.input_file_id, completion_window=body.completion_window,
                         metadata=body.metadata, status=BatchStatus.VALIDATING, created_at=now,
                         expires_at=now + COMPLETION_WINDOW_S)
    await asyncio.to_thread(store.add_batch, record)
    service.wake()
    return batch_object(record)


def _check_metadata(metadata: dict[str, str] | None) -> None:
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA_PAIRS:
        raise _metadata_error(f"holds {len(metadata)} pairs; at most {MAX_METADATA_PAIRS} are allowed")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise _metadata_error(f"key {quote_value(key)} is longer than {MAX_METADATA_KEY_CHARS} characters")
        if len(value) > MAX_METADATA_VALUE_CHARS:
            raise _metadata_error(f"value of {quote_value(key)} is longer than {MAX_METADATA_VALUE_CHARS} characters")


def _metadata_error(problem: str) -> APIError:
    return APIError(HTTPStatus.BAD_REQUEST, f"metadata {problem}", param="metadata", code="invalid_value")


@get_and_head(router, "/v1/batches")
async def list_batches(raw: Request, after: str | None = None,
                       limit: int = Query(DEFAULT_BATCHES_PER_PAGE, ge=1, le=MAX_BATCHES_PER_PAGE),
                       service: BatchService = Service) -> BatchList:
    store = service.storage.existing()
    if store is None:
        return batch_list([], False)
    page = await asyncio.to_thread(store.batches, request_owner(raw).tenant, after, limit)
    if page is None:
        raise batch_not_found(after or "", "after")
    return batch_list(*page)


@get_and_head(router, "/v1/batches/{batch_id}")
async def retrieve_batch(batch_id: str, raw: Request, service: BatchService = Service) -> BatchObject:
    store = service.storage.existing()
    record = await asyncio.to_thread(store.batch, request_owner(raw).tenant, batch_id) if store is not None else None
    if record is None:
        raise batch_not_found(batch_id)
    return batch_object(record)


@router.post("/v1/batches/{batch_id}/cancel")
async def cancel_batch(batch_id: str, raw: Request, service: BatchService = Service) -> BatchObject:
    """No line of the batch starts from now on; those running finish, and the rest go to the error file as
    cancelled once they have (status cancelling, then cancelled)."""
    check_may_change(raw)
    store = service.storage.existing()
    record = (await asyncio.to_thread(store.cancel, request_owner(raw).tenant, batch_id, service.now())
              if store is not None else None)
    if record is None:
        raise batch_not_found(batch_id)
    if record.status not in (BatchStatus.CANCELLING, BatchStatus.CANCELLED):
        raise APIError(HTTPStatus.CONFLICT, f"the batch {batch_id} is {record.status.value}; only a validating or "
                       f"in_progress batch can be cancelled", code="batch_not_cancellable")
    if service.runner is not None:
        service.runner.cancel(batch_id)
    return batch_object(record)
