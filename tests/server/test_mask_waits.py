"""The server's engine thread while its only request waits for a mask: it sleeps (neither spinning nor
counted as stalled), and the mask, once computed, wakes it to finish the request."""
from __future__ import annotations

import asyncio
import re

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.async_engine import AsyncEngine
from tests.engine.test_slow_masks import HANG_GUARD_S, REGEX, MaskGate, constrained
from tests.optional_packages import needs_xgrammar
from tests.server.live_server import BASE_SETTINGS

pytestmark = [needs_xgrammar, pytest.mark.timeout(180)]


def test_the_engine_thread_sleeps_while_its_request_waits_for_a_mask_and_wakes_when_it_comes(chat_model,
                                                                                              monkeypatch):
    gate = MaskGate(monkeypatch)
    config = AutoGLMConfig(model=str(chat_model), **BASE_SETTINGS)

    async def scenario() -> str:
        engine = AsyncEngine(LLMEngine(config.engine_config()), max_waiting_requests=4, request_timeout_s=HANG_GUARD_S)
        engine.start()
        try:
            outputs = engine.generate("held", ["Hello world"], constrained())
            first = asyncio.ensure_future(anext(outputs))
            await asyncio.to_thread(gate.wait_started, 1)
            while engine.heartbeat.busy_since is not None:  # a thread spinning on empty steps never gets here
                await asyncio.sleep(0.01)
            gate.opened.set()
            _, output = await first
            text = output.outputs[0].text + "".join([o.outputs[0].text async for _, o in outputs])
        finally:
            gate.opened.set()
            await engine.shutdown()
        return text

    assert re.fullmatch(REGEX, asyncio.run(scenario()))
