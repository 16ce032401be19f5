"""Streams kept in flight while the stable version is promoted and rolled back, round after round.

Every stream names the model alone, so the server routes it to whatever is stable when it arrives.
Right after each admin call answers, one more request goes out, so that a request routed after the
switch exists at once rather than whenever a stream next ends. Before the next switch every stream has
moved to the new target: a rollback takes back a version that carries the traffic.
"""
from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from autoglm.bench.lib.client import CompletionTarget, send_request
from autoglm.bench.lib.datasets import ServeRequest
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.server import start_server
from autoglm.bench.swap.versions import (
    FIRST_VERSION,
    MODEL_NAME,
    SECOND_VERSION,
    perturbed_copy,
    register_versions,
)

PROMPT = "The harbour was quiet that morning, and the boats"
STATE_POLL_S = 0.1


def version_id(version: str) -> str:
    """How answers name a version of the bench's model, e.g. ``swap@2``."""
    return f"{MODEL_NAME}@{version}"


@dataclass(frozen=True)
class SwapLoad:
    """What a run sends, and how its rounds are paced."""

    base_url: str
    streams: int  # requests kept in flight throughout
    output_len: int
    rounds: int
    settle_s: float  # seconds of streaming before each switch (once every stream is on the stable), after the last
    timeout_s: float


@dataclass(frozen=True)
class Switch:
    """One admin call that moved the stable; times are seconds after the run's start."""

    round: int
    operation: str  # promote | rollback
    target: str  # the version id requests routed after it are served by
    called_at: float
    answered_at: float


@dataclass
class SwapRun:
    requests: list[RequestResult] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    standby_loads_s: list[float] = field(default_factory=list)  # reloading version 2 before each later round


class _Session:
    """One run's client, clock and records."""

    def __init__(self, http: httpx.AsyncClient, load: SwapLoad) -> None:
        self.http = http
        self.load = load
        self.models_url = f"{load.base_url.rstrip('/')}/admin/models"
        self.origin = time.perf_counter()
        self.run = SwapRun()
        self.stopping = asyncio.Event()
        self.probes: list[asyncio.Task[None]] = []
        self.last_sent = [0.0] * load.streams  # when each stream's latest request went out

    def now(self) -> float:
        return time.perf_counter() - self.origin

    async def send(self, model: str = MODEL_NAME) -> RequestResult:
        target = CompletionTarget(self.load.base_url, model, timeout_s=self.load.timeout_s)
        return await send_request(self.http, target, ServeRequest(PROMPT, None, self.load.output_len), self.origin)

    async def keep_streaming(self, stream: int) -> None:
        while not self.stopping.is_set():
            self.last_sent[stream] = self.now()
            self.run.requests.append(await self.send())

    async def wait_for_turnover(self, since: float) -> None:
        """Until every stream has sent a request since then (so is on the version now stable)."""
        deadline = time.monotonic() + self.load.timeout_s
        while min(self.last_sent) < since:
            if time.monotonic() > deadline:
                raise ServeBenchError(f"a stream sent no new request within {self.load.timeout_s:g} s of a switch")
            await asyncio.sleep(STATE_POLL_S)

    async def probe(self) -> None:
        self.run.requests.append(await self.send())

    async def call(self, operation: str, body: dict[str, str]) -> None:
        response = await self.http.post(f"{self.models_url}/{MODEL_NAME}/{operation}", json=body)
        if response.status_code != 200:
            raise ServeBenchError(f"{operation} answered HTTP {response.status_code}: {response.text[:300]}")

    async def switch(self, round_index: int, operation: str, body: dict[str, str], target: str) -> None:
        """Once every stream is on the stable and has streamed a while, the admin call, then a probe request."""
        if self.run.switches:
            await self.wait_for_turnover(self.run.switches[-1].answered_at)
        await asyncio.sleep(self.load.settle_s)
        called_at = self.now()
        await self.call(operation, body)
        answered_at = self.now()
        self.probes.append(asyncio.create_task(self.probe()))
        self.run.switches.append(Switch(round_index, operation, version_id(target), called_at, answered_at))

    async def version_state(self, version: str) -> str:
        response = await self.http.get(self.models_url)
        response.raise_for_status()
        entry = next(model for model in response.json()["models"] if model["name"] == MODEL_NAME)
        return next((item["state"] for item in entry["versions"] if item["version"] == version), "unloaded")

    async def reload_standby(self) -> float:
        """Version 2 loaded again as warm standby once the rollback has unloaded it: the seconds the load took."""
        deadline = time.monotonic() + self.load.timeout_s
        while await self.version_state(SECOND_VERSION) != "unloaded":
            if time.monotonic() > deadline:
                raise ServeBenchError(f"{version_id(SECOND_VERSION)} did not unload within {self.load.timeout_s:g} s "
                                      "of the rollback")
            await asyncio.sleep(STATE_POLL_S)
        started = time.perf_counter()
        await self.call("load", {"version": SECOND_VERSION})
        return time.perf_counter() - started


async def _warm_up(session: _Session) -> None:
    """One request to each version first, so that no measured request pays for an engine's first steps."""
    for result in await asyncio.gather(*(session.send(version_id(version))
                                         for version in (FIRST_VERSION, SECOND_VERSION))):
        if not result.success:
            raise ServeBenchError(f"a warm-up request failed: {result.error}")


async def _run(load: SwapLoad) -> SwapRun:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=load.timeout_s, limits=limits) as http:
        session = _Session(http, load)
        await _warm_up(session)
        streams = [asyncio.create_task(session.keep_streaming(stream)) for stream in range(load.streams)]
        try:
            for round_index in range(load.rounds):
                if round_index:
                    session.run.standby_loads_s.append(await session.reload_standby())
                await session.switch(round_index, "promote", {"version": SECOND_VERSION}, SECOND_VERSION)
                await session.switch(round_index, "rollback", {}, FIRST_VERSION)
            await asyncio.sleep(load.settle_s)
        finally:
            session.stopping.set()
            await asyncio.gather(*streams, *session.probes)
    return session.run


def run_swaps(load: SwapLoad) -> SwapRun:
    """Warm up, keep ``load.streams`` streams in flight, and promote version 2 then roll back, each round."""
    return asyncio.run(_run(load))


def run_swap_bench(args: argparse.Namespace) -> SwapRun:
    """Both versions registered (version 2 written first when ``--model-b`` is not given), one server started
    on them, and its rounds of swaps; the versions and the server are gone when it returns."""
    for flag, folder in (("--model", args.model), ("--model-b", args.model_b)):
        if folder is not None and not folder.is_dir():
            raise ServeBenchError(f"{flag} {folder} is not a checkpoint folder")
    work = Path(tempfile.mkdtemp(prefix="autoglm-bench-swap-"))
    try:
        second = args.model_b
        if second is None:
            print(f"writing version 2: {args.model} with perturbed weights", flush=True)
            second = perturbed_copy(args.model, work / "version-2", args.seed)
        register_versions(work / "registry", args.model, second)
        serve_args = (f"--serve-models {MODEL_NAME},{MODEL_NAME}@{SECOND_VERSION} "
                      f"--registry-dir {shlex.quote(str(work / 'registry'))} {args.serve_args}")
        server = start_server(args.port, None, serve_args, work / "server.log")
        try:
            load = SwapLoad(server.base_url, args.streams, args.output_len, args.rounds, args.settle_s,
                            args.timeout_s)
            print(f"{args.rounds} rounds of promote and rollback, {args.streams} streams in flight", flush=True)
            return run_swaps(load)
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
