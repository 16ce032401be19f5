"""/v1/files: a tenant's uploads (JSONL for the Batch API) and its batches' output and error files.

A tenant reaches only its own files: another's id is as unknown as one that never was.
"""
from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import FileResponse

from autoglm.errors import quote_value
from autoglm.server.batches.ids import new_file_id
from autoglm.server.batches.objects import FileDeleted, FileList, FileObject, file_list, file_object
from autoglm.server.batches.owners import ANONYMOUS, check_may_change, request_owner
from autoglm.server.batches.records import FileRecord
from autoglm.server.batches.service import BatchService, Service
from autoglm.server.batches.store import StorageQuotaExceeded
from autoglm.server.dependencies import get_and_head
from autoglm.server.openai.errors import APIError

router = APIRouter()

BATCH_PURPOSE = "batch"
UPLOAD_FIELDS = ("file", "purpose")
# OpenAI's bounds of a page of files.
MAX_FILES_PER_PAGE = 10_000
# Room in an upload's body for its form around the file: boundaries, headers, the purpose.
FORM_ALLOWANCE_BYTES = 64 * 1024
UPLOAD_PATH = "/v1/files"


def file_not_found(file_id: str, param: str | None = None) -> APIError:
    return APIError(HTTPStatus.NOT_FOUND, f"No such File object: {quote_value(file_id)}", param=param,
                    code="file_not_found")


@router.post(UPLOAD_PATH, response_model=FileObject)
async def upload_file(raw: Request, file: UploadFile = File(...), purpose: str = Form(...),
                      service: BatchService = Service) -> FileObject:
    check_may_change(raw)
    owner = request_owner(raw).tenant
    unknown = [name for name in (await raw.form()) if name not in UPLOAD_FIELDS]
    if unknown:
        raise APIError(HTTPStatus.BAD_REQUEST, f"unknown form field {quote_value(unknown[0])}; an upload holds "
                       f"only {' and '.join(UPLOAD_FIELDS)} (files expire after the server's storage_retention_days)",
                       param=unknown[0], code="unknown_parameter")
    if purpose != BATCH_PURPOSE:
        raise APIError(HTTPStatus.BAD_REQUEST, f"purpose {quote_value(purpose)} is not one this server takes; "
                       f"allowed: '{BATCH_PURPOSE}' (an input file for the Batch API)", param="purpose",
                       code="invalid_value")
    content = await file.read()
    config = service.config
    if len(content) > config.max_file_bytes:
        raise APIError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the file is {len(content)} bytes, more than the "
                       f"{config.max_file_bytes} bytes one file may hold (setting max_file_bytes)", param="file",
                       code="file_too_large")
    await asyncio.to_thread(_check_text, content)
    now = service.now()
    record = FileRecord(new_file_id(), owner, file.filename or "upload.jsonl", purpose, len(content), now,
                        now + service.retention.retention_s)
    store = service.storage.store()
    contents = service.storage.contents
    await asyncio.to_thread(contents.write, record.id, [content])
    try:
        await asyncio.to_thread(store.add_file, record, config.tenant_storage_bytes)
    except StorageQuotaExceeded as full:
        await asyncio.to_thread(contents.delete, record.id)
        holder = "the server's files" if owner == ANONYMOUS else f"tenant '{owner}'"
        raise APIError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                       f"{holder} already hold{'s' * (owner != ANONYMOUS)} {full.held} bytes of files; this one of "
                       f"{record.bytes} bytes would pass the storage quota of {config.tenant_storage_bytes} bytes "
                       f"(setting tenant_storage_bytes); delete files no longer needed (GET and DELETE /v1/files)",
                       param="file", code="storage_quota_exceeded") from None
    return file_object(record)


def _check_text(content: bytes) -> None:
    """A batch input file is JSONL: UTF-8 text, one request a line (each line is checked when a batch reads it)."""
    if not content.strip():
        raise APIError(HTTPStatus.BAD_REQUEST, "the file is empty; a batch input file holds one JSON request a line",
                       param="file", code="invalid_file")
    try:
        content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, f"the file is not UTF-8 text (byte {error.start} is not); a batch "
                       f"input file is JSONL", param="file", code="invalid_file") from None


@get_and_head(router, "/v1/files")
async def list_files(raw: Request, purpose: str | None = None,
                     limit: int = Query(MAX_FILES_PER_PAGE, ge=1, le=MAX_FILES_PER_PAGE),
                     order: Literal["asc", "desc"] = "desc", after: str | None = None,
                     service: BatchService = Service) -> FileList:
    store = service.storage.existing()
    if store is None:
        return file_list([], False)
    page = await asyncio.to_thread(store.files, request_owner(raw).tenant, purpose, after, limit, order == "desc")
    if page is None:
        raise file_not_found(after or "", "after")
    return file_list(*page)


@get_and_head(router, "/v1/files/{file_id}")
async def retrieve_file(file_id: str, raw: Request, service: BatchService = Service) -> FileObject:
    return file_object(await _own_file(service, raw, file_id))


@get_and_head(router, "/v1/files/{file_id}/content")
async def file_content(file_id: str, raw: Request, service: BatchService = Service) -> FileResponse:
    record = await _own_file(service, raw, file_id)
    return FileResponse(service.storage.contents.path(record.id), media_type="application/jsonl")


@router.delete("/v1/files/{file_id}")
async def delete_file(file_id: str, raw: Request, service: BatchService = Service) -> FileDeleted:
    check_may_change(raw)
    store = service.storage.existing()
    if store is None or not await asyncio.to_thread(store.delete_file, request_owner(raw).tenant, file_id):
        raise file_not_found(file_id)
    await asyncio.to_thread(service.storage.contents.delete, file_id)
    return FileDeleted(id=file_id)


async def _own_file(service: BatchService, raw: Request, file_id: str) -> FileRecord:
    store = service.storage.existing()
    record = await asyncio.to_thread(store.file, request_owner(raw).tenant, file_id) if store is not None else None
    if record is None:
        raise file_not_found(file_id)
    return record
