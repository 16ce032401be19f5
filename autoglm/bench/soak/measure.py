"""One phase of a soak: steady "victim" streams, and in the hostile phase big prompts and
clients that leave mid-stream beside them.

The victims run back to back for the whole phase; only their inter-token gaps are the measure.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from autoglm.bench.lib.client import CompletionTarget, fetch_models, send_request
from autoglm.bench.lib.datasets import ServeRequest
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.server import BenchServer, start_server

VICTIM_PROMPT = "Once upon a time, in a quiet town by the sea, there lived"
BIG_PROMPT_WORD = "the quick brown fox "
DISCONNECT_AFTER_EVENTS = 2
# The server's memory is read once the aborted streams' last steps have run.
SETTLE_S = 2.0


@dataclass(frozen=True)
class HostileLoad:
    """What arrives beside the victims in the hostile phase."""

    big_prompt_chars: tuple[int, ...]  # sizes sent in turn
    big_prompt_interval_s: float
    disconnect_interval_s: float


@dataclass
class PhaseResult:
    duration_s: float
    victims: list[RequestResult] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)  # "big prompt 400", "disconnect 200", "victim ok"...

    @property
    def itls_s(self) -> list[float]:
        return [gap for result in self.victims if result.success for gap in result.itls_s]


def big_prompt(chars: int) -> str:
    return (BIG_PROMPT_WORD * (chars // len(BIG_PROMPT_WORD) + 1))[:chars]


async def _victim(http: httpx.AsyncClient, target: CompletionTarget, output_len: int, end: float, origin: float,
                  phase: PhaseResult) -> None:
    request = ServeRequest(VICTIM_PROMPT, None, output_len)
    while time.perf_counter() < end:
        phase.victims.append(await send_request(http, target, request, origin))


async def _big_prompts(http: httpx.AsyncClient, target: CompletionTarget, load: HostileLoad, end: float,
                       phase: PhaseResult) -> None:
    index = 0
    while time.perf_counter() + load.big_prompt_interval_s < end:
        await asyncio.sleep(load.big_prompt_interval_s)
        body = {"model": target.model, "prompt": big_prompt(load.big_prompt_chars[index % len(load.big_prompt_chars)]),
                "max_tokens": 1}
        index += 1
        try:
            response = await http.post(target.url, json=body)
            phase.statuses[f"big prompt {response.status_code}"] += 1
        except httpx.HTTPError as error:
            phase.statuses[f"big prompt {type(error).__name__}"] += 1


async def _disconnects(http: httpx.AsyncClient, target: CompletionTarget, output_len: int, load: HostileLoad,
                       end: float, rng: random.Random, phase: PhaseResult) -> None:
    while time.perf_counter() + load.disconnect_interval_s < end:
        await asyncio.sleep(rng.expovariate(1 / load.disconnect_interval_s))
        body = target.body(ServeRequest(VICTIM_PROMPT, None, output_len))
        try:
            async with http.stream("POST", target.url, json=body) as response:
                events = 0
                async for line in response.aiter_lines():
                    events += line.startswith("data:")
                    if events >= DISCONNECT_AFTER_EVENTS:
                        break
                phase.statuses[f"disconnect {response.status_code}"] += 1
        except httpx.HTTPError as error:
            phase.statuses[f"disconnect {type(error).__name__}"] += 1


async def _run_phase(target: CompletionTarget, num_victims: int, output_len: int, duration_s: float,
                     load: HostileLoad | None, seed: int) -> PhaseResult:
    phase = PhaseResult(duration_s)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=target.timeout_s, limits=limits) as http:
        origin = time.perf_counter()
        end = origin + duration_s
        tasks = [_victim(http, target, output_len, end, origin, phase) for _ in range(num_victims)]
        if load is not None:
            tasks.append(_big_prompts(http, target, load, end, phase))
            tasks.append(_disconnects(http, target, output_len, load, end, random.Random(seed), phase))
        await asyncio.gather(*tasks)
    for result in phase.victims:
        phase.statuses["victim ok" if result.success else "victim failed"] += 1
    return phase


def run_phase(target: CompletionTarget, num_victims: int, output_len: int, duration_s: float,
              load: HostileLoad | None = None, seed: int = 0) -> PhaseResult:
    return asyncio.run(_run_phase(target, num_victims, output_len, duration_s, load, seed))


@dataclass(frozen=True)
class SoakRun:
    """Both phases against one server, and its resident memory around the hostile one (None when unreadable)."""

    base_url: str
    model: str
    baseline: PhaseResult
    hostile: PhaseResult
    rss_before: int | None
    rss_after: int | None


def run_soak_bench(args: argparse.Namespace) -> SoakRun:
    """The baseline phase, then the hostile one, on the server it starts or on ``--base-url``."""
    if args.server_pid is not None and args.base_url is None:
        raise ServeBenchError("--server-pid names the process of a --base-url server")
    if args.base_url is not None:
        server = BenchServer(args.base_url, args.server_pid)
    else:
        log = Path(tempfile.gettempdir()) / f"autoglm-soak-server-{args.port}.log"
        server = start_server(args.port, args.model, args.serve_args, log)
    try:
        model = fetch_models(server.base_url)[0]["id"]
        target = CompletionTarget(server.base_url, model, timeout_s=args.timeout_s)
        hostile_load = HostileLoad(args.big_prompt_chars, args.big_prompt_interval_s, args.disconnect_interval_s)
        print(f"baseline: {args.victims} streams for {args.phase_s:g} s", flush=True)
        baseline = run_phase(target, args.victims, args.output_len, args.phase_s)
        time.sleep(SETTLE_S)
        rss_before = server.resident_bytes()
        print(f"hostile: the same streams, big prompts every {args.big_prompt_interval_s:g} s and disconnects",
              flush=True)
        hostile = run_phase(target, args.victims, args.output_len, args.phase_s, hostile_load, args.seed)
        time.sleep(SETTLE_S)
        rss_after = server.resident_bytes()
    finally:
        server.stop()
    return SoakRun(server.base_url, model, baseline, hostile, rss_before, rss_after)
