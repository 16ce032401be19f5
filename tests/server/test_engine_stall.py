"""/health answers 503 naming the stall while an engine has work but ends no step for engine_stall_timeout_s.

The engine's step is held by a gate the test opens, and time is an injected clock the test moves, so the
stall is certain and its length exact, however loaded the machine.
"""
from __future__ import annotations

import threading

import httpx
import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from tests.server.live_server import BASE_SETTINGS, start_server

pytestmark = pytest.mark.timeout(120)

STALL_TIMEOUT_S = 30.0
HANG_GUARD_S = 60  # only a broken build waits this long


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StepGate:
    """Holds the engine's steps once closed, saying when one is held."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.held = threading.Event()

    def hold(self, step):
        def gated_step():
            if not self.open.is_set():
                self.held.set()
                if not self.open.wait(HANG_GUARD_S):
                    raise RuntimeError("the step gate was never opened")
            return step()
        return gated_step


def test_health_names_a_stalled_engine_and_recovers_when_it_steps_again(chat_model):
    gate = StepGate()

    def load_engine() -> LLMEngine:
        engine = LLMEngine(AutoGLMConfig(model=str(chat_model), **BASE_SETTINGS).engine_config())
        engine.step = gate.hold(engine.step)
        return engine

    running = start_server(chat_model, load_engine=load_engine, engine_stall_timeout_s=STALL_TIMEOUT_S)
    clock = Clock()
    running.state.engine.heartbeat.clock = clock
    try:
        gate.open.clear()
        with httpx.Client(base_url=running.url, timeout=HANG_GUARD_S) as client:
            request = threading.Thread(target=client.post, args=("/v1/completions",),
                                       kwargs={"json": {"model": running.state.model_name, "prompt": "Hi", "max_tokens": 2}})
            request.start()
            assert gate.held.wait(HANG_GUARD_S)
            clock.now += STALL_TIMEOUT_S  # not past the limit yet
            assert client.get("/health").status_code == 200
            clock.now += 1
            stalled = client.get("/health")
            gate.open.set()
            request.join(HANG_GUARD_S)
            # Served by the engine thread after the held step ended (and was counted): no longer stalled.
            assert client.post("/v1/completions", json={"model": running.state.model_name, "prompt": "Hi",
                                                        "max_tokens": 1}).status_code == 200
            recovered = client.get("/health")
    finally:
        gate.open.set()
        running.stop()
    assert stalled.status_code == 503
    error = stalled.json()["error"]
    assert error["code"] == "engine_stalled"
    assert "(31 s)" in error["message"] and f"engine_stall_timeout_s={STALL_TIMEOUT_S:g}" in error["message"]
    assert recovered.status_code == 200
