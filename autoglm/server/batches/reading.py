"""A batch's start: its input file read into lines once, in one transaction, or the batch failed saying why
the file cannot run at all (gone, empty, too many lines)."""
from __future__ import annotations

from autoglm.server.batches.endpoints import BatchEndpoints
from autoglm.server.batches.files import FileContents
from autoglm.server.batches.line_checks import TooManyLines, read_lines
from autoglm.server.batches.records import BatchRecord
from autoglm.server.batches.store import BatchStore


def read_batch(store: BatchStore, contents: FileContents, batch: BatchRecord, endpoints: BatchEndpoints,
               max_lines: int, now: int) -> BatchRecord | None:
    """The batch with its lines read in; None when it failed instead. Runs on a worker thread."""
    path = contents.path(batch.input_file_id)
    if store.file(batch.owner, batch.input_file_id) is None or not path.exists():
        store.fail(batch.id, [_error("input_file_missing", f"the input file {batch.input_file_id} was deleted "
                                                           f"before the batch started")], now)
        return None
    try:
        with path.open(encoding="utf-8") as text:
            lines = read_lines(text, endpoints, max_lines)
    except TooManyLines as error:
        store.fail(batch.id, [_error("too_many_lines", str(error))], now)
        return None
    if not lines:
        store.fail(batch.id, [_error("empty_file", f"the input file {batch.input_file_id} holds no requests")], now)
        return None
    return store.read_in(batch.id, lines, now)


def _error(code: str, message: str) -> dict[str, str]:
    """One of a failed batch's `errors`, as OpenAI lists them."""
    return {"code": code, "message": message, "param": "input_file_id"}
