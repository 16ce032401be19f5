"""The bounds on memory held outside Python: oneDNN's primitive cache, and freed memory handed back when idle."""
from __future__ import annotations

import os

from autoglm.server import async_engine
from autoglm.server.native_memory import ONEDNN_CACHE_CAPACITY, ONEDNN_CACHE_VARIABLE, bound_onednn_primitive_cache
from tests.server.live_server import wait_until


def test_onednn_primitive_cache_is_capped_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(ONEDNN_CACHE_VARIABLE, raising=False)
    bound_onednn_primitive_cache()
    assert os.environ[ONEDNN_CACHE_VARIABLE] == str(ONEDNN_CACHE_CAPACITY)
    monkeypatch.setenv(ONEDNN_CACHE_VARIABLE, "7")
    bound_onednn_primitive_cache()
    assert os.environ[ONEDNN_CACHE_VARIABLE] == "7"


def test_the_engine_thread_releases_free_memory_when_it_runs_out_of_work(server, monkeypatch):
    calls = []
    monkeypatch.setattr(async_engine, "release_free_memory", lambda: calls.append(1))
    server.openai().completions.create(model="tiny-llama", prompt="Hello", max_tokens=3)
    # The thread releases once the request is done and it finds nothing else to do.
    assert wait_until(lambda: len(calls) >= 1, timeout_s=10)
