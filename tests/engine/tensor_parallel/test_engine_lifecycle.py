"""A 2-rank engine on gloo: it runs plans as one process does, stops cleanly, and fails loudly when a worker dies.

The models do not shard yet, so both ranks hold the whole model here (the runtime refuses that outside
these tests); what is tested is the runtime: spawning, the plan broadcast, the lifecycle.
"""
from __future__ import annotations

import os
import signal

import psutil
import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.config import ConfigError
from autoglm.engine import setup, torch_threads
from autoglm.engine.errors import EngineBrokenError
from tests.tiny_models import make_tiny_checkpoint

SETTINGS = {"dtype": "float32", "max_context_len": 64, "block_size": 4, "kv_cache_memory": "1MiB"}
HANG_S = 60  # only to catch a hang
PROMPTS = [[5, 6, 7, 8, 9], [9, 10, 11]]
# Seeded draws, log-probs and prompt log-probs: every part of the plan travels.
PARAMS = SamplingParams(temperature=0.8, top_k=20, seed=7, max_tokens=6, ignore_eos=True, logprobs=2,
                        prompt_logprobs=1, repetition_penalty=1.2)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("llama"))  # 4 heads, 2 KV heads


@pytest.fixture
def sharding_allowed(monkeypatch):
    """Tensor parallelism allowed; torch's thread count, which rank 0 sets to its share of the cores, restored."""
    monkeypatch.setattr(setup, "MODELS_SHARD", True)
    monkeypatch.setattr(torch_threads, "_set_by_an_engine", False)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def completions(llm: LLM) -> list[tuple[list[int], object, object]]:
    return [(out.outputs[0].token_ids, out.outputs[0].logprobs, out.prompt_logprobs)
            for out in llm.generate(PROMPTS, PARAMS, use_tqdm=False)]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(HANG_S * 2)
def test_two_ranks_generate_what_one_does_then_stop(model_dir, sharding_allowed):
    alone = completions(LLM(model=str(model_dir), **SETTINGS))
    with LLM(model=str(model_dir), tensor_parallel_size=2, **SETTINGS) as llm:
        (worker,) = llm.engine._workers.pids
        assert completions(llm) == alone
        assert llm.engine.get_stats().tensor_parallel_size == 2
    assert gone(worker)
    with LLM(model=str(model_dir), tensor_parallel_size=2, **SETTINGS) as llm:  # the process can run another
        (worker,) = llm.engine._workers.pids
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(EngineBrokenError, match="rank 1 .* exited"):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)
        with pytest.raises(EngineBrokenError, match="must be restarted"):
            llm.generate(PROMPTS, PARAMS, use_tqdm=False)


@pytest.mark.parametrize(("settings", "message"), [
    ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ({"distributed_backend": "mpi"}, "'auto', 'gloo', 'nccl'"),
    ({"tensor_parallel_size": 3}, "must divide the model's 4 attention heads; allowed: 1, 2, 4"),
    ({"tensor_parallel_size": 2, "distributed_backend": "nccl"}, "'nccl' needs CUDA devices"),
])
def test_bad_settings_are_refused_before_any_worker_starts(model_dir, sharding_allowed, settings, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        LLM(model=str(model_dir), device="cpu", **SETTINGS, **settings)


def test_tensor_parallelism_waits_for_the_sharded_models(model_dir):
    with pytest.raises(ValueError, match="models do not shard"):
        LLM(model=str(model_dir), tensor_parallel_size=2, **SETTINGS)
