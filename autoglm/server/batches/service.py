"""What the files and batches routes share with the runner: the settings, the storage, the clock, the
endpoints a batch may name, and the runner itself once the app has started."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from http import HTTPStatus

from fastapi import Depends, FastAPI, Request

from autoglm.config.server import StorageConfig
from autoglm.server.batches.dispatch import LineDispatcher
from autoglm.server.batches.endpoints import BatchEndpoints
from autoglm.server.batches.retention import Retention
from autoglm.server.batches.runner import BatchRunner
from autoglm.server.batches.storage import BatchStorage
from autoglm.server.batches.timing import BatchClock
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.keyring import KeyRing


class BatchService:
    def __init__(self, config: StorageConfig, keyring: KeyRing | None, endpoints: BatchEndpoints, host: str,
                 priority: int, clock: BatchClock) -> None:
        """`endpoints` are those the app mounts; `host` a Host its allow-list takes; `priority` the one lines
        run at."""
        self.config = config
        self.storage = BatchStorage(config.folder())
        self.endpoints = endpoints
        self.clock = clock
        self.retention = Retention(self.storage, clock, config)
        self._keyring = keyring
        self._host = host
        self._priority = priority
        self.runner: BatchRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> int:
        return int(self.clock.now())

    def start(self, app: FastAPI, ready: Callable[[], bool]) -> None:
        """Take up the batches an earlier run left, and run them and those to come as `app`'s requests."""
        self.storage.open_existing()
        self.runner = BatchRunner(self.storage, LineDispatcher(app, self._host), self._keyring, self.endpoints,
                                  self.config, self._priority, self.clock, ready)
        self._tasks = [asyncio.create_task(self.runner.run()), asyncio.create_task(self.retention.sweep_periodically())]

    def wake(self) -> None:
        if self.runner is not None:
            self.runner.wake()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.runner is not None:
            await self.runner.stop()
        self.storage.close()


def batch_service(request: Request) -> BatchService:
    """The app's service; a 501 on an application of several replicas, each of which would keep files and
    batches of its own (a tenant's next request may reach another)."""
    service: BatchService | None = request.app.state.batches
    if service is None:
        raise APIError(HTTPStatus.NOT_IMPLEMENTED,
                       "files and batches are kept by one server in its data_dir, and this application runs several "
                       "replicas (ray_max_replicas above 1), which would each keep their own; serve them with "
                       "ray_max_replicas: 1, or with 'autoglm serve' without --ray", code="batches_need_one_replica")
    return service


Service = Depends(batch_service)
