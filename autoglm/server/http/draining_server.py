"""A uvicorn server that drains on SIGTERM instead of dropping requests.

uvicorn's own shutdown stops accepting connections at once and raises the signal again when it
is done, so the process would end with the signal's status. Here the first SIGTERM (or SIGINT)
drains: new requests get 503 while open ones have drain_timeout_s to finish, then the server
stops and the process exits 0. A second signal exits at once.

With a tenants file, SIGHUP reads it again; requests already let in keep their keys' principals.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator, Sequence
from types import FrameType

import uvicorn

from autoglm.server.tenants.admin_routes import reload_tenants
from autoglm.server.state import ServerState
from autoglm.server.tenants.file import TenantsFileError


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first stop signal drains the app instead of dropping requests."""

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.exit_code = 0
        self._state = state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_started = False
        self._drain_task: asyncio.Task[None] | None = None  # held so the running drain is not collected
        self._reloads: set[asyncio.Task[None]] = set()  # held until done, for the same reason

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        with self._reloading_tenants_on_sighup(self._loop):
            await super().serve(sockets)

    @contextlib.contextmanager
    def _reloading_tenants_on_sighup(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Without a tenants file SIGHUP keeps its default action, as before tenants existed."""
        keyring = self._state.keyring
        if keyring is None or keyring.path is None:
            yield
            return
        loop.add_signal_handler(signal.SIGHUP, self._start_reload)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGHUP)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Deliberately not recording the signal, which uvicorn would raise again on the way out.
        if self._drain_started or self._loop is None:
            self.should_exit = self.force_exit = True
            return
        self._drain_started = True
        self._loop.call_soon_threadsafe(self._start_drain)

    def _log_started_message(self, listeners: Sequence[socket.SocketType]) -> None:
        # A model that failed to load while the sockets opened has stopped the server: it never says it runs.
        if not self.should_exit:
            super()._log_started_message(listeners)

    def stop(self, exit_code: int) -> None:
        self.exit_code = exit_code
        self.should_exit = True

    def _start_reload(self) -> None:
        task = asyncio.create_task(self._reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload(self) -> None:
        assert self._state.keyring is not None
        with contextlib.suppress(TenantsFileError):  # logged; the old file stays served
            await reload_tenants(self._state.keyring)

    def _start_drain(self) -> None:
        self._drain_task = asyncio.create_task(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        await self._state.drain()
        await self._state.shutdown()  # ends the requests that outlived the drain
        self.should_exit = True
