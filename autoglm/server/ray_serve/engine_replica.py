"""One engine replica on Ray Serve: the server's own FastAPI app, called by the ingress instead of uvicorn.

Every route, error shape and metric is the app's; this class only gives it requests, reports the
replica's health to Ray (an engine that broke for good, or whose loop stopped, gets the replica
replaced) and serves the app's metrics registry on a port of its own, so Prometheus scrapes every
replica. The replica counts as started once its model has loaded, so Ray sends it nothing before;
it reads the tenants file again then, for the admin calls that reached the running replicas while
it loaded.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from functools import partial

from prometheus_client import start_http_server
from prometheus_client.exposition import ThreadingWSGIServer
from ray import serve
from starlette.types import Message, Scope

from autoglm.config import ServerConfig
from autoglm.server.tenants.admin_routes import reload_tenants
from autoglm.server.app import build_app
from autoglm.server.ray_serve.asgi_call import call_asgi
from autoglm.server.ray_serve.fan_out import ReplicaAnswer
from autoglm.server.state import ServerState
from autoglm.server.tenants.file import TenantsFileError

logger = logging.getLogger(__name__)

# Names the replica that answered, for logs and for telling replicas apart from outside.
REPLICA_HEADER = b"x-autoglm-replica"
_LOAD_POLL_S = 0.05


class EngineReplica:
    """A deployment class: Ray builds one per replica, in its own process."""

    async def __init__(self, config: ServerConfig) -> None:
        self._broken = False
        self._metrics_server: ThreadingWSGIServer | None = None
        self._lifespan = contextlib.AsyncExitStack()
        self._app = build_app(config, on_engine_broken=self._mark_broken,
                              single_replica=config.ray.ray_max_replicas == 1)
        self._state: ServerState = self._app.state.server
        await self._lifespan.enter_async_context(self._app.router.lifespan_context(self._app))
        await self._wait_until_loaded()
        context = serve.get_replica_context()
        self._replica_tag = context.replica_tag
        with contextlib.suppress(TenantsFileError):  # logged; the keys read at the start stay served
            await self.reload_tenants()  # a revoke or reload sent to the replicas while this one loaded missed it
        self._peers = serve.get_deployment_handle(context.deployment, context.app_name)
        self._broadcasts: set[asyncio.Future[list[object]]] = set()  # held until done, so none is collected
        if self._state.lifecycle is not None:
            self._state.lifecycle.on_automatic_rollback = self._end_canary_on_every_replica
        if config.ray.ray_metrics_port is not None:
            port = config.ray.ray_metrics_port + context.rank.local_rank
            self._metrics_server, _ = start_http_server(port, addr=config.http.host,
                                                        registry=self._state.metrics.registry)
            logger.info("replica %s serves its metrics on %s:%d", context.replica_tag, config.http.host, port)

    async def _wait_until_loaded(self) -> None:
        """Until the app has loaded its model; a failed load fails the replica's start (Ray retries it)."""
        while not self._state.started:
            if self._state.load_error is not None:
                raise RuntimeError(self._state.load_error)
            await asyncio.sleep(_LOAD_POLL_S)

    def _mark_broken(self) -> None:
        self._broken = True

    async def handle_http(self, scope: Scope, body: bytes, routing_key: str | None = None) -> AsyncIterator[Message]:
        """The app's answer to one request, message by message. `routing_key` is for the request router."""
        async for message in call_asgi(self._app, scope, body):
            if message["type"] == "http.response.start":
                tag = (REPLICA_HEADER, self._replica_tag.encode())
                message = {**message, "headers": [*message.get("headers", ()), tag]}
            yield message

    async def answer_whole(self, scope: Scope, body: bytes) -> ReplicaAnswer:
        """The app's whole answer to one request: the ingress sends the admin calls that change a replica's
        state to every replica this way (fan_out.py)."""
        start: Message = {}
        parts = []
        async for message in call_asgi(self._app, scope, body):
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
        return ReplicaAnswer(self._replica_tag, start["status"], list(start.get("headers", ())), b"".join(parts))

    async def reload_tenants(self) -> str:
        """Read the tenants file again, as SIGHUP does on a server of its own; raises TenantsFileError on a bad
        file (the keys served stay as they were)."""
        keyring = self._state.keyring
        if keyring is None or keyring.path is None:
            return f"replica {self._replica_tag} serves no tenants file"
        tenants = await reload_tenants(keyring)
        return f"replica {self._replica_tag}: {len(tenants.tenants)} tenants, {len(tenants.keys)} keys"

    async def end_canary(self, name: str, version: str) -> None:
        """Another replica rolled this canary back automatically: send it back to 0% here too."""
        assert self._state.lifecycle is not None, "only a replica serving a registry has canaries"
        await self._state.lifecycle.end_canary(name, version)

    def _end_canary_on_every_replica(self, name: str, version: str) -> None:
        """Each replica judges a canary on its own requests; the first to roll it back ends it on all."""
        ending = asyncio.ensure_future(self._peers.broadcast("end_canary", name, version).results_async(
            return_exceptions=True))
        self._broadcasts.add(ending)
        ending.add_done_callback(self._broadcasts.discard)
        ending.add_done_callback(partial(_log_failures, f"ending the canary {name}@{version}"))

    def check_health(self) -> None:
        """Ray replaces a replica whose check raises: an engine broken for good, or one whose loop stopped."""
        if self._broken:
            raise RuntimeError("the engine broke for good (a tensor-parallel worker died)")
        if unready := self._state.router.unready_stables():
            raise RuntimeError(f"the engine loop of {', '.join(unready)} has stopped")

    async def __del__(self) -> None:
        """Ray has let the ongoing requests finish (graceful_shutdown_timeout_s is drain_timeout_s)."""
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        await self._lifespan.aclose()


def _log_failures(what: str, done: asyncio.Future[list[object]]) -> None:
    if done.cancelled():  # the replica is stopping
        return
    outcomes = [done.exception()] if done.exception() is not None else done.result()
    for failure in (outcome for outcome in outcomes if isinstance(outcome, BaseException)):
        logger.error("%s on a replica failed: %s: %s", what, type(failure).__name__, failure)
