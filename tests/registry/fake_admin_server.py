"""A small stand-in for a server's model admin API (the contract `autoglm models` speaks), served by uvicorn on
a free loopback port: versions change state and aliases in memory, with no engine behind them."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

STARTUP_TIMEOUT_S = 30.0


@dataclass
class FakeModel:
    versions: dict[str, str]  # version -> state
    stable: str
    previous_stable: str | None = None
    canary: dict[str, Any] | None = None

    def entry(self, name: str) -> dict[str, Any]:
        aliases = {"stable": self.stable} | ({"canary": self.canary["version"]} if self.canary else {})
        return {"name": name, "aliases": aliases, "canary": self.canary, "versions": [
            {"version": version, "state": state, "in_flight": 0,
             "aliases": [alias for alias, target in aliases.items() if target == version]}
            for version, state in self.versions.items()]}


@dataclass
class FakeAdminServer:
    """The served models, and each POST body received, in order, as (path, body). Under /plain-text and
    /other-api, GET /admin/models answers as a server of something else would."""

    models: dict[str, FakeModel]
    api_key: str | None = None
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                   "code": None}}, status_code=status)


def build_fake_admin_app(server: FakeAdminServer) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def check_key(request: Request, call_next):
        if server.api_key and request.headers.get("authorization") != f"Bearer {server.api_key}":
            return _error(401, "this route needs an admin key")
        return await call_next(request)

    @app.get("/plain-text/admin/models")
    async def plain_text() -> PlainTextResponse:
        return PlainTextResponse("hello")

    @app.get("/other-api/admin/models")
    async def other_api() -> dict[str, Any]:
        return {"data": []}

    @app.get("/admin/models")
    async def list_models() -> dict[str, Any]:
        return {"models": [model.entry(name) for name, model in server.models.items()]}

    @app.post("/admin/models/{name}/{operation}")
    async def operate(name: str, operation: str, request: Request) -> Any:
        body = await request.json()
        server.received.append((f"/admin/models/{name}/{operation}", body))
        model = server.models.get(name)
        if model is None:
            return _error(404, f"no model {name!r}")
        version = body.get("version")
        if operation in ("load", "promote", "unload", "canary") and version not in model.versions:
            return _error(404, f"model {name!r} has no version {version!r}")
        if operation == "load":
            model.versions[version] = "loaded"
        elif operation == "unload":
            if version == model.stable:
                return _error(409, f"{name}@{version} is stable; promote another version first")
            model.versions[version] = "unloaded"
        elif operation == "promote":
            model.versions[version] = "loaded"
            model.previous_stable, model.stable = model.stable, version
        elif operation == "rollback":
            if model.previous_stable is None:
                return _error(409, f"model {name!r} has no previous stable version")
            model.stable, model.previous_stable = model.previous_stable, model.stable
        elif operation == "canary":
            model.canary = {"version": version, "percent": body["percent"]} if body["percent"] else None
        return model.entry(name)

    return app


@contextmanager
def running(server: FakeAdminServer) -> Iterator[FakeAdminServer]:
    """Serve `server` on 127.0.0.1 for the block; its url is set once it listens."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    uvicorn_server = uvicorn.Server(uvicorn.Config(build_fake_admin_app(server), log_level="warning"))
    thread = threading.Thread(target=uvicorn_server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not uvicorn_server.started:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fake admin server did not start within {STARTUP_TIMEOUT_S} s")
        time.sleep(0.01)
    server.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        yield server
    finally:
        uvicorn_server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_S)
        listener.close()
