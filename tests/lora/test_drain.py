"""Unloading an adapter drains it: a new request naming it is refused at once, a running one finishes with that
adapter's tokens, and only then is it unloaded (and the async engine's remove_lora returns)."""
from __future__ import annotations

import asyncio

import pytest

from autoglm import SamplingParams
from autoglm.sampling_params import RequestOutputKind
from autoglm.config import AutoGLMConfig
from autoglm.engine.async_engine import AsyncEngine
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import LoRAAdapterNotFoundError
from tests.lora.conftest import NUM_NEW_TOKENS, PROMPTS


def lora_engine(lora_case) -> LLMEngine:
    settings = AutoGLMConfig(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=2,
                             kv_cache_memory=1 << 20)
    return LLMEngine(settings.engine_config())


def params() -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True,
                          output_kind=RequestOutputKind.CUMULATIVE)


@pytest.mark.timeout(120)
def test_remove_lora_drains_running_requests_and_refuses_new_ones(lora_case):
    engine = lora_engine(lora_case)
    adapter = lora_case.adapters["mlp"]
    engine.add_lora(adapter)
    engine.add_request("running", PROMPTS[0], params(), lora_request=adapter)
    engine.step()
    unloaded = []
    engine.remove_lora("mlp", lambda: unloaded.append(True))
    assert engine.list_loras() == [] and not unloaded
    with pytest.raises(LoRAAdapterNotFoundError, match="being unloaded"):
        engine.add_request("late", PROMPTS[1], params(), lora_request=adapter)
    outputs = []
    while engine.has_unfinished_requests():
        outputs += engine.step()
    assert unloaded == [True]
    assert outputs[-1].outputs[0].token_ids == lora_case.reference("mlp").token_ids[0]
    with pytest.raises(LoRAAdapterNotFoundError, match="no LoRA adapter 'mlp' is loaded"):
        engine.remove_lora("mlp")


@pytest.mark.timeout(120)
def test_async_engine_loads_serves_and_unloads(lora_case):
    adapter = lora_case.adapters["attention"]

    async def scenario() -> list[int]:
        engine = AsyncEngine(lora_engine(lora_case), max_waiting_requests=8, request_timeout_s=60)
        engine.start()
        try:
            await engine.add_lora(adapter)
            await engine.add_lora(adapter)  # the same name and folder: nothing to do
            assert engine.list_loras() == [adapter]
            tokens: list[int] = []
            async for _, output in engine.generate("a", [PROMPTS[2]], params(), lora_request=adapter):
                tokens = output.outputs[0].token_ids
            await engine.remove_lora("attention")
            assert engine.list_loras() == []
            with pytest.raises(LoRAAdapterNotFoundError):
                async for _ in engine.generate("b", [PROMPTS[2]], params(), lora_request=adapter):
                    pass
            return tokens
        finally:
            await engine.shutdown()

    assert asyncio.run(scenario()) == lora_case.reference("attention").token_ids[2]
