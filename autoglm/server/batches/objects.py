"""The File and Batch objects and their lists, field for field as OpenAI returns them."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from autoglm.server.batches.records import BatchRecord, FileRecord


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    expires_at: int
    filename: str
    purpose: str
    status: Literal["processed"] = "processed"  # deprecated by OpenAI; what its SDK still reads
    status_details: None = None


class FileList(BaseModel):
    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None
    last_id: str | None
    has_more: bool


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class RequestCounts(BaseModel):
    total: int
    completed: int  # lines in the output file
    failed: int  # lines in the error file


class InputTokensDetails(BaseModel):
    cached_tokens: int


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class BatchUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class BatchErrors(BaseModel):
    object: Literal["list"] = "list"
    data: list[dict[str, Any]]


class BatchObject(BaseModel):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    model: None = None
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    in_progress_at: int | None
    expires_at: int
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    usage: BatchUsage
    metadata: dict[str, str] | None


class BatchList(BaseModel):
    object: Literal["list"] = "list"
    data: list[BatchObject]
    first_id: str | None
    last_id: str | None
    has_more: bool


def file_object(record: FileRecord) -> FileObject:
    return FileObject(id=record.id, bytes=record.bytes, created_at=record.created_at, expires_at=record.expires_at,
                      filename=record.filename, purpose=record.purpose)


def file_list(records: list[FileRecord], has_more: bool) -> FileList:
    return FileList(data=[file_object(record) for record in records], first_id=records[0].id if records else None,
                    last_id=records[-1].id if records else None, has_more=has_more)


def batch_object(record: BatchRecord) -> BatchObject:
    return BatchObject(
        id=record.id, endpoint=record.endpoint,
        errors=BatchErrors(data=record.errors) if record.errors is not None else None,
        input_file_id=record.input_file_id, completion_window=record.completion_window, status=record.status.value,
        output_file_id=record.output_file_id, error_file_id=record.error_file_id, created_at=record.created_at,
        in_progress_at=record.in_progress_at, expires_at=record.expires_at, finalizing_at=record.finalizing_at,
        completed_at=record.completed_at, failed_at=record.failed_at, expired_at=record.expired_at,
        cancelling_at=record.cancelling_at, cancelled_at=record.cancelled_at,
        request_counts=RequestCounts(total=record.total, completed=record.completed, failed=record.failed),
        usage=BatchUsage(input_tokens=record.input_tokens,
                         input_tokens_details=InputTokensDetails(cached_tokens=record.cached_tokens),
                         output_tokens=record.output_tokens, output_tokens_details=OutputTokensDetails(),
                         total_tokens=record.input_tokens + record.output_tokens),
        metadata=record.metadata)


def batch_list(records: list[BatchRecord], has_more: bool) -> BatchList:
    return BatchList(data=[batch_object(record) for record in records], first_id=records[0].id if records else None,
                     last_id=records[-1].id if records else None, has_more=has_more)
