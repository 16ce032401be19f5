"""Files and batches in SQLite: what each tenant keeps, each batch's state, and each line's result.

A line's result is written in the same transaction that counts it in its batch, so a server killed at
any moment and started again finds every line either done (its result kept, counted once) or not
(run again): none lost, none twice. The file is in WAL mode with `synchronous=NORMAL`: a killed
process loses nothing committed; a machine that loses power may lose the last lines recorded, which
then run again. One connection, shared by the threads that use it one at a time.
"""
from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

from autoglm.server.batches.line_checks import RefusedLine
from autoglm.server.batches.records import (
    FINAL_STATUSES, ENDINGS, BatchRecord, BatchStatus, FileRecord, LineRequest,
)
from autoglm.server.batches.results import LineResult, not_run

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    filename TEXT NOT NULL,
    purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS files_of_owner ON files (owner, seq);
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    key_id TEXT,
    endpoint TEXT NOT NULL,
    input_file_id TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    metadata TEXT,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    in_progress_at INTEGER,
    finalizing_at INTEGER,
    completed_at INTEGER,
    failed_at INTEGER,
    expired_at INTEGER,
    cancelling_at INTEGER,
    cancelled_at INTEGER,
    output_file_id TEXT,
    error_file_id TEXT,
    errors TEXT,
    ending TEXT,
    total INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS batches_of_owner ON batches (owner, seq);
CREATE TABLE IF NOT EXISTS lines (
    batch_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    custom_id TEXT,
    url TEXT,
    body TEXT,
    result TEXT,
    succeeded INTEGER,
    PRIMARY KEY (batch_id, line)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pending_lines ON lines (batch_id, line) WHERE result IS NULL;
"""
_BATCH_COLUMNS = tuple(field.name for field in fields(BatchRecord))
_FILE_COLUMNS = tuple(field.name for field in fields(FileRecord))
_FINAL = tuple(status.value for status in FINAL_STATUSES)


class StorageQuotaExceeded(Exception):
    """A file would take its owner past the storage quota; `held` is what the owner keeps already."""

    def __init__(self, held: int) -> None:
        super().__init__(f"{held} bytes held")
        self.held = held


class BatchStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._turn = threading.Lock()
        with self._turn:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.executescript(_SCHEMA)

    def close(self) -> None:
        with self._turn:
            self._connection.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One thread's turn on the connection, in one transaction committed at its end (rolled back on error)."""
        with self._turn:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    # Files.

    def add_file(self, record: FileRecord, quota: int) -> None:
        """Keep `record`, unless it would take its owner past `quota` bytes: then StorageQuotaExceeded."""
        with self._transaction() as db:
            held = self._held_bytes(db, record.owner)
            if held + record.bytes > quota:
                raise StorageQuotaExceeded(held)
            _insert(db, "files", _FILE_COLUMNS, [_file_row(record)])

    def file(self, owner: str, file_id: str) -> FileRecord | None:
        with self._transaction() as db:
            row = db.execute(f"SELECT {_columns(_FILE_COLUMNS)} FROM files WHERE owner = ? AND id = ?",
                             (owner, file_id)).fetchone()
        return FileRecord(*row) if row is not None else None

    def files(self, owner: str, purpose: str | None, after: str | None, limit: int,
              newest_first: bool) -> tuple[list[FileRecord], bool] | None:
        """A page of the owner's files, and whether more follow; None when `after` names none of them."""
        where, arguments = "owner = ?", [owner]
        if purpose is not None:
            where, arguments = where + " AND purpose = ?", [*arguments, purpose]
        with self._transaction() as db:
            page = _page(db, "files", _FILE_COLUMNS, where, arguments, owner, after, limit, newest_first)
        return None if page is None else ([FileRecord(*row) for row in page[0]], page[1])

    def delete_file(self, owner: str, file_id: str) -> bool:
        with self._transaction() as db:
            return db.execute("DELETE FROM files WHERE owner = ? AND id = ?", (owner, file_id)).rowcount == 1

    def expired_files(self, now: int) -> list[str]:
        """Delete the files whose time has come; their ids, for their contents to go too."""
        with self._transaction() as db:
            ids = [row[0] for row in db.execute("SELECT id FROM files WHERE expires_at <= ?", (now,))]
            db.execute("DELETE FROM files WHERE expires_at <= ?", (now,))
        return ids

    def file_ids(self) -> set[str]:
        with self._transaction() as db:
            return {row[0] for row in db.execute("SELECT id FROM files")}

    # Batches.

    def add_batch(self, record: BatchRecord) -> None:
        with self._transaction() as db:
            _insert(db, "batches", _BATCH_COLUMNS, [_batch_row(record)])

    def batch(self, owner: str, batch_id: str) -> BatchRecord | None:
        with self._transaction() as db:
            return _one_batch(db, "owner = ? AND id = ?", (owner, batch_id))

    def batches(self, owner: str, after: str | None, limit: int) -> tuple[list[BatchRecord], bool] | None:
        """A page of the owner's batches, newest first, and whether more follow; None when `after` names none."""
        with self._transaction() as db:
            page = _page(db, "batches", _BATCH_COLUMNS, "owner = ?", [owner], owner, after, limit, True)
        return None if page is None else ([_batch_record(row) for row in page[0]], page[1])

    def unfinished_batches(self) -> list[BatchRecord]:
        """Every batch that has not ended, oldest first."""
        with self._transaction() as db:
            rows = db.execute(f"SELECT {_columns(_BATCH_COLUMNS)} FROM batches WHERE status NOT IN "
                              f"({_marks(_FINAL)}) ORDER BY seq", _FINAL).fetchall()
        return [_batch_record(row) for row in rows]

    def cancel(self, owner: str, batch_id: str, now: int) -> BatchRecord | None:
        """Mark a validating or running batch as cancelling; the batch as it then stands (None if the owner has
        no such batch)."""
        with self._transaction() as db:
            db.execute("UPDATE batches SET status = ?, cancelling_at = ? WHERE owner = ? AND id = ? AND status IN "
                       "(?, ?)", (BatchStatus.CANCELLING.value, now, owner, batch_id,
                                  BatchStatus.VALIDATING.value, BatchStatus.IN_PROGRESS.value))
            return _one_batch(db, "owner = ? AND id = ?", (owner, batch_id))

    def read_in(self, batch_id: str, lines: list[LineRequest | RefusedLine], now: int) -> BatchRecord:
        """Keep a batch's lines as read from its input file, those refused already done, and start it (a batch
        cancelled meanwhile stays cancelling)."""
        runnable = [(batch_id, line.line, line.custom_id, line.url, line.body) for line in lines
                    if isinstance(line, LineRequest)]
        refused = [line for line in lines if isinstance(line, RefusedLine)]
        with self._transaction() as db:
            db.executemany("INSERT INTO lines (batch_id, line, custom_id, url, body) VALUES (?, ?, ?, ?, ?)", runnable)
            db.executemany("INSERT INTO lines (batch_id, line, custom_id, result, succeeded) VALUES (?, ?, ?, ?, 0)",
                           [(batch_id, line.line, line.result.entry["custom_id"], json.dumps(line.result.entry))
                            for line in refused])
            db.execute("UPDATE batches SET total = ?, failed = ?, in_progress_at = ?, status = CASE status WHEN ? "
                       "THEN ? ELSE status END WHERE id = ?",
                       (len(lines), len(refused), now, BatchStatus.VALIDATING.value, BatchStatus.IN_PROGRESS.value,
                        batch_id))
            return _one_batch(db, "id = ?", (batch_id,))

    def fail(self, batch_id: str, errors: list[dict[str, Any]], now: int) -> None:
        """End a batch whose input file cannot run at all, saying why."""
        with self._transaction() as db:
            db.execute("UPDATE batches SET status = ?, failed_at = ?, errors = ? WHERE id = ?",
                       (BatchStatus.FAILED.value, now, json.dumps(errors), batch_id))

    def pending_lines(self, batch_id: str, running: Collection[int], limit: int) -> list[LineRequest]:
        """The first `limit` lines not yet done, leaving out those `running`."""
        with self._transaction() as db:
            rows = db.execute("SELECT line, custom_id, url, body FROM lines WHERE batch_id = ? AND result IS NULL "
                              "ORDER BY line LIMIT ?", (batch_id, limit + len(running))).fetchall()
        return [LineRequest(*row) for row in rows if row[0] not in running][:limit]

    def record(self, batch_id: str, line: int, result: LineResult) -> None:
        """Keep a line's result and count it in its batch, at once; a line already done is left as it was."""
        with self._transaction() as db:
            done = db.execute("UPDATE lines SET result = ?, succeeded = ?, body = NULL WHERE batch_id = ? AND "
                              "line = ? AND result IS NULL",
                              (json.dumps(result.entry), int(result.succeeded), batch_id, line)).rowcount
            if done:
                usage = result.usage
                db.execute("UPDATE batches SET completed = completed + ?, failed = failed + ?, "
                           "input_tokens = input_tokens + ?, cached_tokens = cached_tokens + ?, "
                           "output_tokens = output_tokens + ? WHERE id = ?",
                           (int(result.succeeded), int(not result.succeeded), usage.input, usage.cached,
                            usage.output, batch_id))

    def begin_ending(self, batch_id: str, ending: BatchStatus, now: int,
                     not_run_reason: tuple[str, str] | None) -> BatchRecord:
        """Settle how a batch ends once none of its lines runs: each line not done is answered with
        `not_run_reason` (its error code and message: cancelled, expired), and the batch is finalizing (or
        stays cancelling)."""
        with self._transaction() as db:
            left = db.execute("SELECT line, custom_id FROM lines WHERE batch_id = ? AND result IS NULL",
                              (batch_id,)).fetchall()
            assert not left or not_run_reason is not None, "a batch ends with lines left only when cut short"
            db.executemany("UPDATE lines SET result = ?, succeeded = 0, body = NULL WHERE batch_id = ? AND line = ?",
                           [(json.dumps(not_run(custom_id, *not_run_reason).entry), batch_id, line)
                            for line, custom_id in left])
            db.execute("UPDATE batches SET failed = failed + ?, ending = ?, finalizing_at = ?, status = CASE status "
                       "WHEN ? THEN status ELSE ? END WHERE id = ?",
                       (len(left), ending.value, now, BatchStatus.CANCELLING.value, BatchStatus.FINALIZING.value,
                        batch_id))
            return _one_batch(db, "id = ?", (batch_id,))

    def results(self, batch_id: str, after_line: int, limit: int) -> list[tuple[int, bool, str]]:
        """Done lines after `after_line`, in order: (line, succeeded, the result's JSON text)."""
        with self._transaction() as db:
            rows = db.execute("SELECT line, succeeded, result FROM lines WHERE batch_id = ? AND line > ? "
                              "ORDER BY line LIMIT ?", (batch_id, after_line, limit)).fetchall()
        return [(line, bool(succeeded), result) for line, succeeded, result in rows]

    def finish(self, batch_id: str, ending: BatchStatus, output: FileRecord | None, errors: FileRecord | None,
               now: int) -> None:
        """End a batch whose output and error files are written: keep them as its owner's, and let its lines go."""
        written = [record for record in (output, errors) if record is not None]
        with self._transaction() as db:
            _insert(db, "files", _FILE_COLUMNS, [_file_row(record) for record in written])
            db.execute(f"UPDATE batches SET status = ?, {ENDINGS[ending]} = ?, output_file_id = ?, error_file_id = ? "
                       f"WHERE id = ?", (ending.value, now, output.id if output else None,
                                         errors.id if errors else None, batch_id))
            db.execute("DELETE FROM lines WHERE batch_id = ?", (batch_id,))

    def expired_batches(self, created_before: int) -> list[str]:
        """Delete the batches that have ended and were created before `created_before`; their ids."""
        with self._transaction() as db:
            ids = [row[0] for row in db.execute(f"SELECT id FROM batches WHERE created_at < ? AND status IN "
                                                f"({_marks(_FINAL)})", (created_before, *_FINAL))]
            db.executemany("DELETE FROM batches WHERE id = ?", [(batch_id,) for batch_id in ids])
        return ids

    @staticmethod
    def _held_bytes(db: sqlite3.Connection, owner: str) -> int:
        return db.execute("SELECT COALESCE(SUM(bytes), 0) FROM files WHERE owner = ?", (owner,)).fetchone()[0]


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _marks(values: tuple[object, ...]) -> str:
    return ", ".join("?" * len(values))


def _insert(db: sqlite3.Connection, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    db.executemany(f"INSERT INTO {table} ({_columns(columns)}) VALUES ({_marks(columns)})", rows)


def _file_row(record: FileRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in _FILE_COLUMNS)


def _page(db: sqlite3.Connection, table: str, columns: tuple[str, ...], where: str, arguments: list[Any],
          owner: str, after: str | None, limit: int, newest_first: bool) -> tuple[list[tuple[Any, ...]], bool] | None:
    """`limit` rows in creation order (or its reverse) after the owner's row `after`, and whether more follow."""
    if after is not None:
        found = db.execute(f"SELECT seq FROM {table} WHERE owner = ? AND id = ?", (owner, after)).fetchone()
        if found is None:
            return None
        where, arguments = where + (" AND seq < ?" if newest_first else " AND seq > ?"), [*arguments, found[0]]
    rows = db.execute(f"SELECT {_columns(columns)} FROM {table} WHERE {where} ORDER BY seq "
                      f"{'DESC' if newest_first else 'ASC'} LIMIT ?", (*arguments, limit + 1)).fetchall()
    return rows[:limit], len(rows) > limit


def _batch_row(record: BatchRecord) -> tuple[Any, ...]:
    values = {name: getattr(record, name) for name in _BATCH_COLUMNS}
    values["metadata"] = json.dumps(record.metadata) if record.metadata is not None else None
    values["errors"] = json.dumps(record.errors) if record.errors is not None else None
    values["status"] = record.status.value
    values["ending"] = record.ending.value if record.ending is not None else None
    return tuple(values[name] for name in _BATCH_COLUMNS)


def _batch_record(row: tuple[Any, ...]) -> BatchRecord:
    values = dict(zip(_BATCH_COLUMNS, row))
    values["metadata"] = json.loads(values["metadata"]) if values["metadata"] is not None else None
    values["errors"] = json.loads(values["errors"]) if values["errors"] is not None else None
    values["status"] = BatchStatus(values["status"])
    values["ending"] = BatchStatus(values["ending"]) if values["ending"] is not None else None
    return BatchRecord(**values)


def _one_batch(db: sqlite3.Connection, where: str, arguments: tuple[Any, ...]) -> BatchRecord | None:
    row = db.execute(f"SELECT {_columns(_BATCH_COLUMNS)} FROM batches WHERE {where}", arguments).fetchone()
    return _batch_record(row) if row is not None else None
