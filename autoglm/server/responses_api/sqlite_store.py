"""Stored responses in one SQLite file under data_dir, rows keyed by tenant: a server's own store.

The file (in WAL mode, so reads go on beside a write) is opened with the first call, so a server whose
clients never store a response never creates it. Calls take turns on one connection, each on a worker
thread, so the event loop never waits on the disk; each first deletes the rows past their time.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from autoglm.server.responses_api.store import store_unavailable

logger = logging.getLogger(__name__)

FILE_NAME = "responses.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    expires_at REAL NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS responses_by_expiry ON responses (expires_at);
"""
Result = TypeVar("Result")


class SqliteResponseStore:
    """A ResponseStore in the SQLite file `path`; `clock` is the wall clock, given by tests to move time."""

    def __init__(self, path: Path, retention_s: float, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._retention_s = retention_s
        self._clock = clock
        self._connection: sqlite3.Connection | None = None
        self._turn = asyncio.Lock()

    async def put(self, tenant: str, response_id: str, record: bytes) -> None:
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                                              (tenant, response_id, self._clock() + self._retention_s, record)))

    async def get(self, tenant: str, response_id: str) -> bytes | None:
        row = await self._run(lambda db: db.execute("SELECT record FROM responses WHERE tenant = ? AND id = ?",
                                                    (tenant, response_id)).fetchone())
        return row[0] if row is not None else None

    async def delete(self, tenant: str, response_id: str) -> bool:
        deleted = await self._run(lambda db: db.execute("DELETE FROM responses WHERE tenant = ? AND id = ?",
                                                        (tenant, response_id)).rowcount)
        return deleted > 0

    async def used_bytes(self, tenant: str) -> int:
        row = await self._run(lambda db: db.execute(
            "SELECT COALESCE(SUM(LENGTH(record)), 0) FROM responses WHERE tenant = ?", (tenant,)).fetchone())
        return row[0]

    async def close(self) -> None:
        async with self._turn:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _run(self, call: Callable[[sqlite3.Connection], Result]) -> Result:
        """`call` in one transaction on a worker thread, after the expired rows are deleted; shielded, so that
        a cancelled request leaves the transaction to finish, holding its turn."""
        async def in_turn() -> Result:
            async with self._turn:
                return await asyncio.to_thread(self._transaction, call)
        try:
            return await asyncio.shield(in_turn())
        except sqlite3.Error:
            logger.exception("the stored responses' file %s cannot be used", self.path)
            raise store_unavailable() from None

    def _transaction(self, call: Callable[[sqlite3.Connection], Result]) -> Result:
        db = self._connection or self._open()
        with db:
            db.execute("DELETE FROM responses WHERE expires_at <= ?", (self._clock(),))
            return call(db)

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_SCHEMA)
        self._connection = db
        return db
