"""Files and batches deleted once storage_retention_days have passed: files (uploads, batches' output and
error files) when they expire, with their contents; batches that have ended, counted from their creation."""
from __future__ import annotations

import asyncio
import logging

from autoglm.config.server import StorageConfig
from autoglm.server.batches.storage import BatchStorage
from autoglm.server.batches.timing import BatchClock

logger = logging.getLogger(__name__)

# How often the sweep runs; what it deletes is at most this late.
SWEEP_INTERVAL_S = 3600.0
SECONDS_PER_DAY = 86_400


def retention_seconds(config: StorageConfig) -> int:
    return int(config.storage_retention_days * SECONDS_PER_DAY)


class Retention:
    def __init__(self, storage: BatchStorage, clock: BatchClock, config: StorageConfig) -> None:
        self._storage = storage
        self._clock = clock
        self.retention_s = retention_seconds(config)

    def sweep(self) -> None:
        """Delete what has expired by the clock now. Runs on a worker thread (or a test's own)."""
        store = self._storage.existing()
        if store is None:
            return
        now = int(self._clock.now())
        for file_id in store.expired_files(now):
            self._storage.contents.delete(file_id)
        store.expired_batches(now - self.retention_s)

    async def sweep_periodically(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            try:
                await asyncio.to_thread(self.sweep)
            except Exception:
                logger.exception("deleting expired files and batches failed; trying again in %g s", SWEEP_INTERVAL_S)
