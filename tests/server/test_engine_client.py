"""The engine client is all the server sees of an engine: what it reports is the engine's own, and it serves."""
from __future__ import annotations

import asyncio

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.client import EngineClient, TensorParallelGroupInUse, engine_builder, open_client
from autoglm.engine.tensor_parallel import worker_group
from autoglm.sampling_params import SamplingParams
from tests.server.live_server import BASE_SETTINGS


def test_the_built_client_reports_its_engines_limits_and_generates(chat_model):
    config = AutoGLMConfig(model=str(chat_model), **BASE_SETTINGS)
    client = open_client(engine_builder(config.engine_config()), max_waiting_requests=4, request_timeout_s=60)
    engine = client.engine
    assert isinstance(client, EngineClient)
    assert client.config == config.engine_config() and client.model_path == engine.model_path
    assert client.tokenizer is engine.tokenizer and client.max_context_len == engine.max_context_len
    assert client.inputs is engine.inputs
    assert client.linear_methods == (f"{engine.linear_methods.layers.describe(engine.dtype)}; "
                                     f"{engine.linear_methods.lm_head.describe(engine.dtype)}")
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)

    async def scenario() -> list[int]:
        client.start()
        try:
            tokens: list[int] = []
            async for index, output in client.generate("r", ["Hello"], params):
                assert index == 0
                tokens += output.outputs[0].token_ids
            return tokens
        finally:
            await client.shutdown()

    assert len(asyncio.run(scenario())) == 3
    assert not client.is_running


def test_a_second_tensor_parallel_engine_is_refused_while_one_serves(chat_model, monkeypatch):
    """A hot swap must not build a tensor-parallel engine beside the one serving: it would close it."""
    monkeypatch.setattr(worker_group, "_member", object())  # a group held by the serving engine
    config = AutoGLMConfig(model=str(chat_model), tensor_parallel_size=2, **BASE_SETTINGS)
    build = engine_builder(config.engine_config())
    with pytest.raises(TensorParallelGroupInUse, match="unload that version first"):
        build()
