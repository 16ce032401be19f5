"""A swap never drops a request: 100 streams in flight through a promote and then a rollback all finish, each
on the version it started on, while the requests that start after each switch go to the new target."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from tests.server.live_server import wait_until
from tests.server.model_versions import MODEL, PROMPT, serve_registry, served_model

STREAMS_BEFORE_PROMOTE, STREAMS_PER_SWITCH = 50, 25
HANG_S = 60.0  # a guard against hangs only; the rollback's measured figure is printed (well under 1 s)


@pytest.fixture
def served(registry_dir, monkeypatch):
    """The server, with each version's steps held until the test releases them: the streams stay in flight
    through both switches however fast or loaded the machine is."""
    running = serve_registry(registry_dir, kv_cache_memory="24MiB")
    running.releases = {}
    for version in running.state.pool.held():
        release = running.releases[version.version_id] = threading.Event()
        step = version.engine.engine.step
        monkeypatch.setattr(version.engine.engine, "step",
                            lambda step=step, release=release: (release.wait(HANG_S), step())[1])
    yield running
    for release in running.releases.values():
        release.set()
    running.stop()


async def _stream(client: httpx.AsyncClient, user: str, first_chunk: asyncio.Event) -> list[str]:
    """The model field of every chunk of one streamed completion; raises if it fails or ends without [DONE]."""
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 40, "temperature": 0, "ignore_eos": True,
            "stream": True, "user": user}
    models, done = [], False
    async with client.stream("POST", "/v1/completions", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line.removeprefix("data: "))
                assert "error" not in chunk, chunk
                models.append(chunk["model"])
                first_chunk.set()
    assert done and models
    return models


async def _swap_under_load(url: str, state, releases: dict[str, threading.Event]) -> tuple[list[list[str]], float]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        def start(count: int, offset: int) -> tuple[list[asyncio.Task], asyncio.Event]:
            first = asyncio.Event()
            return [asyncio.create_task(_stream(client, f"user-{offset + i}", first)) for i in range(count)], first

        before, _ = start(STREAMS_BEFORE_PROMOTE, 0)
        await asyncio.to_thread(wait_until, lambda: state.pool.in_flight(f"{MODEL}@1") == STREAMS_BEFORE_PROMOTE)
        promote = await client.post(f"/admin/models/{MODEL}/promote", json={"version": "2"})
        assert promote.status_code == 200, promote.text
        after_promote, _ = start(STREAMS_PER_SWITCH, 100)
        await asyncio.to_thread(wait_until, lambda: state.pool.in_flight(f"{MODEL}@2") == STREAMS_PER_SWITCH)
        assert all(not task.done() for task in before), "the first streams should still be in flight"
        rollback_started = time.perf_counter()
        rollback = await client.post(f"/admin/models/{MODEL}/rollback", json={})
        assert rollback.status_code == 200, rollback.text
        assert all(not task.done() for task in after_promote), "the second streams should still be in flight"
        for release in releases.values():
            release.set()
        after_rollback, first_after_rollback = start(STREAMS_PER_SWITCH, 200)
        await first_after_rollback.wait()
        rollback_to_first_s = time.perf_counter() - rollback_started
        results = await asyncio.gather(*before, *after_promote, *after_rollback)
    return results, rollback_to_first_s


def test_streams_in_flight_through_promote_and_rollback_finish_on_the_version_they_started_on(served):
    results, rollback_to_first_s = asyncio.run(_swap_under_load(served.url, served.state, served.releases))
    print(f"rollback call to the first token served by the warm previous version: {rollback_to_first_s:.3f} s")
    served_by = [set(models) for models in results]
    assert all(len(models) == 1 for models in served_by), "a stream changed version midway"
    expected = ([f"{MODEL}@1"] * STREAMS_BEFORE_PROMOTE + [f"{MODEL}@2"] * STREAMS_PER_SWITCH
                + [f"{MODEL}@1"] * STREAMS_PER_SWITCH)
    assert [models.pop() for models in served_by] == expected
    assert rollback_to_first_s < HANG_S
    # The rolled-back version unloads once its last stream has ended.
    assert wait_until(lambda: served_model(served.url)["versions"][1]["state"] == "unloaded")
    assert httpx.get(served.url + "/health", timeout=10).status_code == 200
