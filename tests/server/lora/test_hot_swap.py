"""Adapters loaded and unloaded while 50 streams run across the base and two adapters: every stream ends whole,
a request for the unloaded adapter is a clean 404, and the engine's KV blocks all come back."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.server.live_server import start_server, wait_until
from tests.lora.adapters import ADAPTER_SPECS, make_adapter

SPEC = ADAPTER_SPECS["everything"]  # rank 16 on attention and MLP, rsLoRA
BASE = "base"
STREAMS = 50
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def served(chat_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hot-adapters")
    for seed, name in enumerate(("alpha", "beta", "gamma"), start=1):
        make_adapter(chat_model, folder / name, SPEC, seed)
    running = start_server(chat_model, served_model_name=BASE, enable_lora=True, max_loras=2, max_cpu_loras=3,
                           allowed_lora_path=str(folder), lora_modules={"alpha": str(folder / "alpha"),
                                                                        "beta": str(folder / "beta")})
    yield running
    running.stop()


async def _stream(http: httpx.AsyncClient, model: str, started: asyncio.Event) -> tuple[int, int, str | None]:
    """A streamed completion's status, tokens written and finish reason; `started` is set at its first chunk."""
    body = {"model": model, "prompt": "Hello world", "max_tokens": MAX_TOKENS, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    tokens, finish = 0, None
    async with http.stream("POST", "/v1/completions", json=body) as response:
        async for line in response.aiter_lines():
            started.set()
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk["choices"]:
                finish = chunk["choices"][0]["finish_reason"] or finish
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    started.set()
    return response.status_code, tokens, finish


async def _swap_under_load(url: str) -> tuple[list[tuple[int, int, str | None]], list[int], httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        models = [(BASE, "alpha", "beta")[index % 3] for index in range(STREAMS)]
        started = [asyncio.Event() for _ in models]
        streams = [asyncio.create_task(_stream(http, model, event)) for model, event in zip(models, started)]
        # Every stream for beta is past routing before beta unloads: each must end whole.
        await asyncio.gather(*(event.wait() for model, event in zip(models, started) if model == "beta"))
        swaps = await asyncio.gather(
            http.post("/v1/load_lora_adapter", json={"lora_name": "gamma", "lora_path": "gamma"}),
            http.post("/v1/unload_lora_adapter", json={"lora_name": "beta"}))
        refused = await http.post("/v1/completions", json={"model": "beta", "prompt": "Hello", "max_tokens": 2})
        results = await asyncio.gather(*streams)
        return results, [swap.status_code for swap in swaps], refused


def test_streams_survive_adapters_loading_and_unloading_and_nothing_leaks(served):
    results, swaps, refused = asyncio.run(_swap_under_load(served.url))
    assert swaps == [200, 200]
    assert results == [(200, MAX_TOKENS, "length")] * STREAMS
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found"
    gamma = httpx.post(served.url + "/v1/completions", timeout=60,
                       json={"model": "gamma", "prompt": "Hello", "max_tokens": 2})
    assert gamma.status_code == 200 and gamma.json()["model"] == "gamma"
    engine = served.state.engine
    blocks = engine.engine.block_manager
    assert wait_until(lambda: engine.num_open_requests == 0 and blocks.num_free_blocks == blocks.num_blocks)
    blocks.check_invariants()
