"""What the store keeps of a file and a batch, as plain data."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class BatchStatus(str, Enum):
    """OpenAI's statuses of a batch."""

    VALIDATING = "validating"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


# A batch in one of these has ended: its files are written and its lines gone from the store.
FINAL_STATUSES = (BatchStatus.FAILED, BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED)
# How a batch may end once its lines have stopped, and the column that says when.
ENDINGS = {BatchStatus.COMPLETED: "completed_at", BatchStatus.EXPIRED: "expired_at",
           BatchStatus.CANCELLED: "cancelled_at"}


@dataclass(frozen=True)
class FileRecord:
    id: str
    owner: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    expires_at: int


@dataclass(frozen=True)
class BatchRecord:
    """A batch as stored: the request that made it, where it stands, and its counts and usage so far.
    `ending` is set once its lines have stopped and its files are being written."""

    id: str
    owner: str
    key_id: str | None
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    status: BatchStatus
    created_at: int
    expires_at: int
    in_progress_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    ending: BatchStatus | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    @property
    def lines_read(self) -> bool:
        """Whether its input file has been read into lines (a batch is read once, as it starts)."""
        return self.in_progress_at is not None or self.status is BatchStatus.FAILED

    @property
    def all_done(self) -> bool:
        return self.lines_read and self.completed + self.failed == self.total


@dataclass(frozen=True)
class LineRequest:
    """A line of an input file to run: its request body as JSON text."""

    line: int
    custom_id: str
    url: str
    body: str
