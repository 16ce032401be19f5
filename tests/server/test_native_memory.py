"""The bounds on memory held outside Python: oneDNN's primitive cache, and freed memory handed back when idle."""
from __future__ import annotations

import os

import torch

from autoglm.engine.native_memory import ONEDNN_CACHE_CAPACITY, ONEDNN_CACHE_VARIABLE, bound_onednn_primitive_cache
from tests.server.live_server import wait_until
from tests.test_host_allocator import needs_glibc


def test_onednn_primitive_cache_is_capped_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(ONEDNN_CACHE_VARIABLE, raising=False)
    bound_onednn_primitive_cache()
    assert os.environ[ONEDNN_CACHE_VARIABLE] == str(ONEDNN_CACHE_CAPACITY)
    monkeypatch.setenv(ONEDNN_CACHE_VARIABLE, "7")
    bound_onednn_primitive_cache()
    assert os.environ[ONEDNN_CACHE_VARIABLE] == "7"


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@needs_glibc
def test_the_engine_thread_releases_free_memory_when_it_runs_out_of_work(server):
    """A CPU engine keeps freed blocks for reuse (its allocator thresholds are raised), so a freed
    256 MiB tensor stays resident until the engine thread, out of work, hands free memory back; a
    drop of half its size leaves room for what serving the request allocates meanwhile."""
    block = torch.ones(64 << 20)
    del block
    freed = resident_mib()
    server.openai().completions.create(model="tiny-llama", prompt="Hello", max_tokens=3)
    # The thread releases once the request is done and it finds nothing else to do.
    assert wait_until(lambda: resident_mib() < freed - 128, timeout_s=30)
