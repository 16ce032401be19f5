"""``bench batch``' run: one server; interactive chat requests one at a time alone (half before the batch,
half after it, so that a shared machine's drift falls on both sides alike), and as many while a batch of chat
lines runs; the batch's own time."""
from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from autoglm.bench.batch.batch_api import (BatchWatch, batch_lines, create_batch, error_messages,
                                           upload_batch_file)
from autoglm.bench.batch.chat_target import ChatTarget
from autoglm.bench.lib.client import fetch_models, send_request
from autoglm.bench.lib.datasets import ServeRequest, random_requests
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.serve_metrics import aggregate
from autoglm.bench.lib.server import start_server
from autoglm.model_paths import resolve_model_path

# Unmeasured requests first, so that the alone phase does not pay for warming up.
WARMUP_REQUESTS = 4


@dataclass(frozen=True)
class BatchRun:
    """The served model's name, each interactive phase's figures and the batch's."""

    model: str
    alone: dict[str, Any]
    beside_batch: dict[str, Any]
    batch: dict[str, Any]


def phase_figures(results: Sequence[RequestResult], duration_s: float) -> dict[str, Any]:
    return {"metrics": aggregate(results, duration_s).to_dict(),
            "errors": sorted({result.error for result in results if result.error})}


async def one_at_a_time(http: httpx.AsyncClient, target: ChatTarget, requests: Sequence[ServeRequest],
                        origin: float) -> tuple[list[RequestResult], float]:
    """Each request sent once the one before has ended, as one user at a time would; the results and the
    seconds they took together."""
    start = time.perf_counter()
    results = [await send_request(http, target, request, origin) for request in requests]
    return results, time.perf_counter() - start


@dataclass(frozen=True)
class Workload:
    """Every request of the run, each phase's drawn anew so that no phase finds another's in the prefix cache."""

    warmup: list[ServeRequest]
    alone_before: list[ServeRequest]
    beside_batch: list[ServeRequest]
    alone_after: list[ServeRequest]
    batch: list[ServeRequest]

    @classmethod
    def draw(cls, args: argparse.Namespace) -> Workload:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(args.model))

        def requests(phase: str, count: int) -> list[ServeRequest]:
            rng = random.Random(f"{args.seed}:{phase}")
            return random_requests(tokenizer, count, args.input_len, args.output_len, 0.0, rng)

        before = (args.interactive_requests + 1) // 2
        return cls(requests("warm-up", WARMUP_REQUESTS), requests("alone-before", before),
                   requests("beside-batch", args.interactive_requests),
                   requests("alone-after", args.interactive_requests - before), requests("batch", args.batch_lines))


def _during_batch(results: Sequence[RequestResult], watch: BatchWatch) -> int:
    """How many requests ended before the batch was seen ended: those measured beside it."""
    return sum(result.end_time is not None and watch.ended_s is not None and result.end_time <= watch.ended_s
               for result in results)


async def measure(base_url: str, target: ChatTarget, workload: Workload, args: argparse.Namespace
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Half the alone phase, then the batch made and, once it runs, the beside phase; the batch followed to its
    end, then the alone phase's other half."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=args.timeout_s, limits=limits) as http:
        origin = time.perf_counter()
        await one_at_a_time(http, target, workload.warmup, origin)
        before, before_s = await one_at_a_time(http, target, workload.alone_before, origin)
        file_id = await upload_batch_file(http, base_url, batch_lines(target.model, workload.batch))
        batch_id = await create_batch(http, base_url, file_id)
        watch = BatchWatch(origin, time.perf_counter() - origin)
        following = asyncio.create_task(watch.follow(http, base_url, batch_id, args.batch_timeout_s))
        await watch.running.wait()
        results, duration_s = await one_at_a_time(http, target, workload.beside_batch, origin)
        await following
        beside = {**phase_figures(results, duration_s), "during_batch": _during_batch(results, watch)}
        after, after_s = await one_at_a_time(http, target, workload.alone_after, origin)
        alone = phase_figures(before + after, before_s + after_s)
        counts = watch.last.get("request_counts") or {}
        batch = {"id": batch_id, "status": watch.last["status"], "lines": len(workload.batch),
                 "completed": counts.get("completed", 0), "failed": counts.get("failed", 0),
                 "duration_s": watch.duration_s,
                 "lines_per_s": counts.get("completed", 0) / watch.duration_s if watch.duration_s > 0 else 0.0,
                 "errors": await error_messages(http, base_url, watch.last.get("error_file_id"))}
    return alone, beside, batch


def run_batch_bench(args: argparse.Namespace) -> BatchRun:
    """A server of its own (its data directory a fresh one), measured, then stopped."""
    folder = Path(tempfile.mkdtemp(prefix="autoglm-bench-batch-"))
    serve_args = f"{args.serve_args} --data-dir {shlex.quote(str(folder / 'data'))}"
    workload = Workload.draw(args)
    server = start_server(args.port, args.model, serve_args, folder / "server.log")
    try:
        model = fetch_models(server.base_url)[0]["id"]
        target = ChatTarget(server.base_url, model, timeout_s=args.timeout_s)
        print(f"{args.interactive_requests} interactive requests one at a time alone (half before the batch, half "
              f"after) and as many beside a batch of {args.batch_lines} lines", flush=True)
        alone, beside, batch = asyncio.run(measure(server.base_url, target, workload, args))
    finally:
        server.stop()
    return BatchRun(model, alone, beside, batch)
