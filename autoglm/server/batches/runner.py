"""The task that runs every batch: reads a new batch's lines, runs its lines a few at a time across the whole
server, and ends it (completed, cancelled, expired) with its output and error files.

Lines run in the order of their file, at most batch_max_lines_in_flight on the server at once; a free
slot goes to the tenant with the fewest lines running (its oldest batch first), so that one tenant's
big batch never shuts out another's. A line answered "retry later" pauses its batch for as long as
the answer says, through the injected clock, and runs again. Nothing starts while the server is not
ready (loading, draining); a cancelled or expired batch starts no line, lets those running finish,
then ends. What is running is known here only: a restart runs again every line not recorded done.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from autoglm.config.server import StorageConfig
from autoglm.server.batches.dispatch import LineDispatcher
from autoglm.server.batches.endpoints import BatchEndpoints
from autoglm.server.batches.finalize import finalize_batch
from autoglm.server.batches.line_run import DEFAULT_RETRY_S, RetryLater, run_line
from autoglm.server.batches.principals import line_principal
from autoglm.server.batches.reading import read_batch
from autoglm.server.batches.records import BatchRecord, BatchStatus, LineRequest
from autoglm.server.batches.retention import retention_seconds
from autoglm.server.batches.storage import BatchStorage
from autoglm.server.batches.store import BatchStore
from autoglm.server.batches.timing import BatchClock
from autoglm.server.tenants.keyring import KeyRing

logger = logging.getLogger(__name__)

# While a batch runs: how often its window is looked at again when nothing else wakes the runner.
RUNNING_POLL_S = 1.0
# While the server is not ready: how often it is looked at again.
READY_POLL_S = 0.1


class BatchRunner:
    def __init__(self, storage: BatchStorage, dispatcher: LineDispatcher, keyring: KeyRing | None,
                 endpoints: BatchEndpoints, config: StorageConfig, priority: int, clock: BatchClock,
                 ready: Callable[[], bool]) -> None:
        """`priority` is the one every line runs at; `ready` says whether the server takes requests."""
        self._storage = storage
        self._dispatcher = dispatcher
        self._keyring = keyring
        self._endpoints = endpoints
        self._config = config
        self._priority = priority
        self._clock = clock
        self._ready = ready
        self._wake = asyncio.Event()
        self._running: dict[str, set[int]] = {}  # each batch's lines in flight
        self._owners: dict[str, str] = {}  # each batch with lines in flight: its owner
        self._paused: dict[str, asyncio.Task[None]] = {}  # batches waiting out a Retry-After
        self._cancelled: set[str] = set()
        self._line_tasks: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Look at the batches again now: one was made, or the clock moved."""
        self._wake.set()

    def cancel(self, batch_id: str) -> None:
        """The batch is cancelling: start none of its lines from now on."""
        self._cancelled.add(batch_id)
        self._wake.set()

    def running(self, batch_id: str) -> frozenset[int]:
        """The batch's lines in flight now."""
        return frozenset(self._running.get(batch_id, ()))

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait_s = await self._advance()
            except Exception:  # the store's disk, most likely: the batches stay as they were recorded
                logger.exception("moving the batches on failed; trying again in %g s", RUNNING_POLL_S)
                wait_s = RUNNING_POLL_S
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Stop the lines in flight; they are not recorded, so they run again when the server starts again."""
        tasks = [*self._line_tasks, *self._paused.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _advance(self) -> float | None:
        """Move every unfinished batch on; how long until it should be looked at again unless woken (None:
        only when woken)."""
        store = self._storage.existing()
        if store is None:
            return None
        if not self._ready():
            return READY_POLL_S
        batches = await asyncio.to_thread(store.unfinished_batches)
        startable = []
        for batch in batches:
            if not batch.lines_read:
                read = await asyncio.to_thread(read_batch, store, self._storage.contents, batch, self._endpoints,
                                               self._config.max_file_lines, self._now())
                if read is None:
                    continue
                batch = read
            ending = self._ending(batch)
            if ending is None:
                startable.append(batch)
            elif not self._running.get(batch.id):
                await asyncio.to_thread(finalize_batch, store, self._storage.contents, batch, ending, self._now(),
                                        retention_seconds(self._config))
                self._cancelled.discard(batch.id)
        await self._start_lines(store, startable)
        return RUNNING_POLL_S if batches else None

    def _ending(self, batch: BatchRecord) -> BatchStatus | None:
        """How the batch ends, once it has stopped starting lines; None while it runs."""
        if batch.ending is not None:
            return batch.ending
        if batch.status is BatchStatus.CANCELLING or batch.id in self._cancelled:
            return BatchStatus.CANCELLED
        if batch.all_done:
            return BatchStatus.COMPLETED
        if self._now() >= batch.expires_at:
            return BatchStatus.EXPIRED
        return None

    async def _start_lines(self, store: BatchStore, batches: list[BatchRecord]) -> None:
        free = self._config.batch_max_lines_in_flight - sum(map(len, self._running.values()))
        queues: dict[str, list[tuple[BatchRecord, LineRequest]]] = {}  # by owner, oldest batch first
        for batch in batches:
            if free > 0 and batch.id not in self._paused:
                pending = await asyncio.to_thread(store.pending_lines, batch.id, self.running(batch.id), free)
                if pending:
                    queues.setdefault(batch.owner, []).extend((batch, line) for line in pending)
        while free > 0 and queues:
            owner = min(queues, key=self._lines_running_for)
            batch, line = queues[owner].pop(0)
            if not queues[owner]:
                del queues[owner]
            if self._may_start(batch) and line.line not in self._running.get(batch.id, ()):
                self._start(store, batch, line)
                free -= 1

    def _lines_running_for(self, owner: str) -> int:
        return sum(len(self._running[batch_id]) for batch_id, of in self._owners.items() if of == owner)

    def _may_start(self, batch: BatchRecord) -> bool:
        """Checked again just before a line starts: the batch may have been cancelled, paused or have expired
        while its lines were being fetched."""
        return (self._ready() and batch.id not in self._cancelled and batch.id not in self._paused
                and self._now() < batch.expires_at)

    def _start(self, store: BatchStore, batch: BatchRecord, line: LineRequest) -> None:
        self._running.setdefault(batch.id, set()).add(line.line)
        self._owners[batch.id] = batch.owner
        task = asyncio.create_task(self._run_line(store, batch, line))
        self._line_tasks.add(task)
        task.add_done_callback(self._line_tasks.discard)

    async def _run_line(self, store: BatchStore, batch: BatchRecord, line: LineRequest) -> None:
        try:
            outcome = await run_line(self._dispatcher, line, partial(line_principal, self._keyring, batch),
                                     self._priority)
            if isinstance(outcome, RetryLater):
                self._pause(batch.id, outcome.after_s)
            else:
                await asyncio.to_thread(store.record, batch.id, line.line, outcome)
        except Exception:
            logger.exception("batch %s: running line %d failed; it runs again", batch.id, line.line)
            self._pause(batch.id, DEFAULT_RETRY_S)
        finally:
            running = self._running[batch.id]
            running.discard(line.line)
            if not running:
                del self._running[batch.id], self._owners[batch.id]
            self._wake.set()

    def _pause(self, batch_id: str, seconds: float) -> None:
        """Start none of the batch's lines for `seconds`."""
        if batch_id not in self._paused:
            self._paused[batch_id] = asyncio.create_task(self._resume_after(batch_id, seconds))

    async def _resume_after(self, batch_id: str, seconds: float) -> None:
        try:
            await self._clock.sleep(seconds)
        finally:
            del self._paused[batch_id]
            self._wake.set()

    def _now(self) -> int:
        return int(self._clock.now())
