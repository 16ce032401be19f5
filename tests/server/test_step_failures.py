"""A request that makes engine steps fail gets an error; the streams beside it finish as they would have."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from autoglm.runner import model_runner
from tests.engine.test_step_isolation import FAULTY_SEED, FaultySamplingBatch

NORMAL = [{"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stream": True}
          for prompt in ("ROMEO:", "Hello world", "The")]
FAULTY = {"prompt": "ROMEO:", "max_tokens": 4, "temperature": 0, "seed": FAULTY_SEED}


def streamed_text(url: str, body: dict) -> str:
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return "".join(choice["text"] for line in lines[:-1] for choice in json.loads(line)["choices"])


def hold_steps_until_requests(server, monkeypatch, count: int) -> None:
    """The engine steps only once `count` requests have reached it, so they share their first step."""
    engine = server.state.engine.engine
    step = engine.step
    opened = []

    def gated_step():
        if not opened and len(engine.requests) < count:
            return []
        opened.append(True)
        return step()

    monkeypatch.setattr(engine, "step", gated_step)


def test_a_faulty_request_ends_alone_and_is_counted(server, monkeypatch):
    expected = [streamed_text(server.url, body) for body in NORMAL]
    failures = server.metrics().get("autoglm:num_failed_steps_total", 0.0)
    monkeypatch.setattr(model_runner, "SamplingBatch", FaultySamplingBatch)
    hold_steps_until_requests(server, monkeypatch, len(NORMAL) + 1)
    with ThreadPoolExecutor(len(NORMAL) + 1) as pool:
        streams = [pool.submit(streamed_text, server.url, body) for body in NORMAL]
        faulty = pool.submit(httpx.post, server.url + "/v1/completions", json=FAULTY, timeout=120).result()
        got = [stream.result() for stream in streams]
    assert faulty.status_code == 500
    assert faulty.json()["error"]["code"] == "engine_error"
    assert "injected sampler fault" in faulty.json()["error"]["message"]
    assert got == expected
    assert server.metrics()["autoglm:num_failed_steps_total"] >= failures + 2  # shared step, then alone
    manager = server.state.engine.engine.block_manager
    assert manager.num_referenced_blocks() == 0
    manager.check_invariants()
