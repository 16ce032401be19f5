"""A batch's end: its output and error files written from the results its store holds, then the batch marked
ended with them in one transaction.

The files are written before that transaction, each whole under its final id (the same however often it is
asked, see ids.py), so a crash in between leaves a batch still finalizing, done over when the server starts
again, and never two files for one.
"""
from __future__ import annotations

from collections.abc import Iterator

from autoglm.server.batches.files import FileContents
from autoglm.server.batches.ids import result_file_id
from autoglm.server.batches.records import BatchRecord, BatchStatus, FileRecord
from autoglm.server.batches.results import CANCELLED, EXPIRED
from autoglm.server.batches.store import BatchStore

OUTPUT_PURPOSE = "batch_output"
# Lines read from the store at a time.
_PAGE_LINES = 1000
# Why the lines left when a batch ends were never run; a completed batch has none left.
_NOT_RUN_REASONS = {BatchStatus.CANCELLED: CANCELLED, BatchStatus.EXPIRED: EXPIRED}


def finalize_batch(store: BatchStore, contents: FileContents, batch: BatchRecord, ending: BatchStatus, now: int,
                   retention_s: int) -> None:
    """End `batch`, none of whose lines is running, as `ending` (or as it was already ending, when a restart cut
    its end short). Runs on a worker thread."""
    if batch.ending is None:
        batch = store.begin_ending(batch.id, ending, now, _NOT_RUN_REASONS.get(ending))
    assert batch.ending is not None
    output = _write(store, contents, batch, True, now, retention_s) if batch.completed else None
    errors = _write(store, contents, batch, False, now, retention_s) if batch.failed else None
    store.finish(batch.id, batch.ending, output, errors, now)


def _write(store: BatchStore, contents: FileContents, batch: BatchRecord, succeeded: bool, now: int,
           retention_s: int) -> FileRecord:
    """The output file (`succeeded`) or the error file of `batch`, written."""
    kind = "output" if succeeded else "error"
    file_id = result_file_id(batch.id, kind)
    size = contents.write(file_id, _lines(store, batch.id, succeeded))
    return FileRecord(file_id, batch.owner, f"{batch.id}_{kind}.jsonl", OUTPUT_PURPOSE, size, now,
                      now + retention_s)


def _lines(store: BatchStore, batch_id: str, succeeded: bool) -> Iterator[bytes]:
    after = 0
    while page := store.results(batch_id, after, _PAGE_LINES):
        for line, line_succeeded, result in page:
            if line_succeeded == succeeded:
                yield (result + "\n").encode("utf-8")
        after = page[-1][0]
