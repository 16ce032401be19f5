"""Each tenant's usage, requests and tokens by day, kept in an SQLite file so it survives a restart.

A request is added to counts in memory as it runs (on the event loop, at once: the request and its
prompt with its first tokens, then each step's completion tokens); a flush adds those to the file on a
worker thread, every usage_flush_interval_s and at shutdown, so no request ever waits on the disk and a
crash loses at most one interval of what running streams delivered.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

from autoglm.user_data import user_data_dir

logger = logging.getLogger(__name__)

# SQLite's name for a database that lives in memory: usage kept for the process's life only.
IN_MEMORY = ":memory:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT NOT NULL,
    day TEXT NOT NULL,
    requests INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_requests INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
)
"""
# A file written before cached_requests was counted gains the column, zero for its past days.
_ADD_CACHED_REQUESTS = "ALTER TABLE usage ADD COLUMN cached_requests INTEGER NOT NULL DEFAULT 0"


@dataclass(frozen=True)
class Usage:
    """Requests served and their tokens; cached_tokens are the prompt tokens found in the prefix cache,
    cached_requests the requests answered from the response cache (counted in requests and tokens too)."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cached_requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, name) + getattr(other, name) for name in _USAGE_FIELDS))


_USAGE_FIELDS = tuple(field.name for field in fields(Usage))
_ADD = f"""
INSERT INTO usage (tenant, day, {", ".join(_USAGE_FIELDS)}) VALUES (?, ?{", ?" * len(_USAGE_FIELDS)})
ON CONFLICT (tenant, day) DO UPDATE SET
    {", ".join(f"{name} = {name} + excluded.{name}" for name in _USAGE_FIELDS)}
"""
_SUMS = ", ".join(f"SUM({name})" for name in _USAGE_FIELDS)


@dataclass(frozen=True)
class TenantUsage:
    """A tenant's usage today (UTC) and since the file was started."""

    today: Usage = Usage()
    all_time: Usage = Usage()

    def __add__(self, other: TenantUsage) -> TenantUsage:
        return TenantUsage(self.today + other.today, self.all_time + other.all_time)


def utc_day(now: datetime | None = None) -> str:
    return f"{now or datetime.now(timezone.utc):%Y-%m-%d}"


def default_usage_db() -> Path:
    """``$XDG_DATA_HOME/autoglm/usage.sqlite``, else ``~/.local/share/autoglm/usage.sqlite``."""
    return user_data_dir() / "usage.sqlite"


class UsageLedger:
    """Usage by tenant and day: added in memory as requests run, written to SQLite by `flush`.

    Flushes and reads take turns (one asyncio lock), so the connection is used by one thread at a time
    and a read never misses counts that a flush has taken out of memory but not yet written.
    """

    def __init__(self, path: str) -> None:
        if path != IN_MEMORY:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._connection = sqlite3.connect(path, check_same_thread=False)
        with self._connection:
            self._connection.execute(_SCHEMA)
            columns = {row[1] for row in self._connection.execute("PRAGMA table_info(usage)")}
            if "cached_requests" not in columns:
                self._connection.execute(_ADD_CACHED_REQUESTS)
        self._pending: dict[tuple[str, str], Usage] = {}  # by (tenant, day)
        self._turn = asyncio.Lock()

    def record(self, tenant: str, usage: Usage) -> None:
        """Add `usage` (a request's, or what a step of it added) to today's counts of `tenant`; costs no I/O."""
        key = (tenant, utc_day())
        self._pending[key] = self._pending.get(key, Usage()) + usage

    async def flush(self) -> None:
        """Add the counts recorded since the last flush to the file; kept for the next one if that fails.

        Shielded: a cancelled caller leaves the write to finish, holding its turn, so no later flush or
        close overlaps it on the connection."""
        await asyncio.shield(self._flush())

    async def _flush(self) -> None:
        async with self._turn:
            pending, self._pending = self._pending, {}
            if not pending:
                return
            try:
                await asyncio.to_thread(self._write, pending)
            except sqlite3.Error:
                logger.exception("writing usage to %s failed; retrying at the next flush", self.path)
                for (tenant, day), usage in pending.items():
                    self._pending[(tenant, day)] = self._pending.get((tenant, day), Usage()) + usage

    async def flush_periodically(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.flush()

    async def totals(self) -> dict[str, TenantUsage]:
        """Every tenant's usage today and in all, the counts not yet flushed included."""
        async with self._turn:
            pending = dict(self._pending)
            today = utc_day()
            totals = await asyncio.to_thread(self._read, today)
        for (tenant, day), usage in pending.items():
            totals[tenant] = totals.get(tenant, TenantUsage()) + TenantUsage(
                usage if day == today else Usage(), usage)
        return totals

    async def close(self) -> None:
        """Write what is left, then close the file. Idempotent."""
        await self.flush()
        async with self._turn:
            self._connection.close()

    def _write(self, pending: dict[tuple[str, str], Usage]) -> None:
        rows = [(tenant, day, *(getattr(usage, name) for name in _USAGE_FIELDS))
                for (tenant, day), usage in pending.items()]
        with self._connection:
            self._connection.executemany(_ADD, rows)

    def _read(self, today: str) -> dict[str, TenantUsage]:
        all_time = {tenant: Usage(*sums) for tenant, *sums in
                    self._connection.execute(f"SELECT tenant, {_SUMS} FROM usage GROUP BY tenant")}
        on_day = {tenant: Usage(*sums) for tenant, *sums in
                  self._connection.execute(f"SELECT tenant, {_SUMS} FROM usage WHERE day = ? GROUP BY tenant",
                                           (today,))}
        return {tenant: TenantUsage(on_day.get(tenant, Usage()), usage) for tenant, usage in all_time.items()}
