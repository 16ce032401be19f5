"""Clients that go away, many clients at once, and the metrics that watch them."""
from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from openai import AsyncOpenAI

from tests.server.live_server import long_completion, slow_down_steps, wait_until

pytestmark = pytest.mark.timeout(90)

NUM_CONCURRENT = 200


def is_running_one_request(metrics: dict[str, float]) -> bool:
    return metrics["autoglm:num_requests_running"] == 1 and metrics["autoglm:kv_cache_usage_perc"] > 0


def test_disconnect_mid_stream_frees_the_blocks(server, monkeypatch, caplog):
    slow_down_steps(server, monkeypatch, step_s=0.05)  # the whole request would take 10 s
    generated_before = server.metrics()["autoglm:generation_tokens_total"]
    with caplog.at_level(logging.INFO, logger="autoglm.requests"):
        with httpx.stream("POST", server.url + "/v1/completions", json=long_completion(stream=True)) as streamed:
            lines = streamed.iter_lines()
            assert next(lines).startswith("data: ")
            # The engine publishes its gauges just after it hands out a step's outputs.
            assert wait_until(lambda: is_running_one_request(server.metrics()))
        # Leaving the block closed the connection mid-stream.
        assert wait_until(lambda: server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0)
    assert server.metrics()["autoglm:num_requests_running"] == 0
    assert server.state.engine.num_open_requests == 0
    assert server.metrics()["autoglm:generation_tokens_total"] - generated_before < 100
    assert [json.loads(r.getMessage())["status"] for r in caplog.records if r.name == "autoglm.requests"] == [499]


def test_disconnect_while_queued_leaves_the_queue(single_slot_server, monkeypatch):
    server = single_slot_server
    slow_down_steps(server, monkeypatch, step_s=0.05)  # the running request would take 10 s
    with httpx.stream("POST", server.url + "/v1/completions", json=long_completion(stream=True)) as streamed:
        lines = streamed.iter_lines()
        next(lines)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=1.0)
        assert wait_until(lambda: server.metrics()["autoglm:num_requests_waiting"] == 0)
        assert server.metrics()["autoglm:num_requests_running"] == 1
    assert wait_until(lambda: server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0)


async def stream_text(client: AsyncOpenAI, prompt: str) -> tuple[str, str | None]:
    stream = await client.completions.create(model="tiny-llama", prompt=prompt, max_tokens=4, temperature=0,
                                             stream=True, extra_body={"ignore_eos": True})
    text, finish_reason = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.text
            finish_reason = choice.finish_reason or finish_reason
    return text, finish_reason


def test_many_concurrent_streams_all_complete_correctly(server):
    prompts = [f"Numbers like {i}" for i in range(8)]
    client = server.openai()
    expected = {p: client.completions.create(model="tiny-llama", prompt=p, max_tokens=4, temperature=0,
                                             extra_body={"ignore_eos": True}).choices[0].text for p in prompts}

    async def run_all() -> list[tuple[str, str | None]]:
        limits = httpx.Limits(max_connections=NUM_CONCURRENT)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http_client:
            async_client = AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                                       http_client=http_client)
            return await asyncio.gather(*(stream_text(async_client, prompts[i % len(prompts)])
                                          for i in range(NUM_CONCURRENT)))

    results = asyncio.run(asyncio.wait_for(run_all(), timeout=80))
    for i, (text, finish_reason) in enumerate(results):
        assert (text, finish_reason) == (expected[prompts[i % len(prompts)]], "length")
    assert wait_until(lambda: server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0)


def test_metrics_parse_and_move_as_requests_are_served(server):
    before = server.metrics()
    result = server.openai().completions.create(model="tiny-llama", prompt="Hello world", max_tokens=5,
                                                temperature=0, extra_body={"ignore_eos": True})
    expected = {
        "autoglm:request_success_total{finished_reason=length}": 1,
        "autoglm:prompt_tokens_total": result.usage.prompt_tokens,
        "autoglm:generation_tokens_total": 5,
        "autoglm:prefix_cache_queries_total": result.usage.prompt_tokens,
        "autoglm:time_to_first_token_seconds_count": 1,
        "autoglm:e2e_request_latency_seconds_count": 1,
        "autoglm:request_queue_time_seconds_count": 1,
        "autoglm:inter_token_latency_seconds_count": 4,
    }

    def moved() -> dict[str, float]:
        after = server.metrics()
        return {name: after[name] - before.get(name, 0.0) for name in expected}

    # The engine's counters are published after the step that answered the request.
    wait_until(lambda: moved() == expected)
    assert moved() == expected
    after = server.metrics()
    assert after["autoglm:num_requests_running"] == after["autoglm:num_requests_waiting"] == 0


def test_engine_stats_are_logged_while_busy(server, caplog, monkeypatch):
    slow_down_steps(server, monkeypatch)
    with caplog.at_level("INFO", logger="autoglm.stats"):
        httpx.post(server.url + "/v1/completions", json=long_completion(max_tokens=60), timeout=30)
    lines = [record.getMessage() for record in caplog.records if record.name == "autoglm.stats"]
    assert lines and "generation throughput" in lines[0] and "KV cache usage" in lines[0]
