"""A 2-rank engine on gloo: it runs plans as one process does (the same tokens, log-probs within float32
tolerance of a sharded sum), stops cleanly, fails loudly when a worker dies, and gives way to a newer one."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from autoglm import LLM, SamplingParams
from autoglm.config import ConfigError
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


REPOSITORY = Path(__file__).resolve().parents[3]
LOGPROB_TOLERANCE = 1e-4  # the ranks' partial sums add up in another order than one process's


def completions(llm: LLM) -> list[tuple[list[int], list[float], list[float | None]]]:
    """Each prompt's tokens, the log-prob of each, and the log-prob of each prompt token."""
    return [(out.outputs[0].token_ids,
             [position[token].logprob for token, position in zip(out.outputs[0].token_ids, out.outputs[0].logprobs)],
             [None if position is None else position[token].logprob
              for token, position in zip(out.prompt_token_ids, out.prompt_logprobs)])
            for out in llm.generate(PROMPTS, PARAMS, use_tqdm=False)]


def assert_same_completions(got: list, expected: list) -> None:
    for (tokens, logprobs, prompt_logprobs), (want_tokens, want_logprobs, want_prompt) in zip(got, expected,
                                                                                                strict=True):
        assert tokens == want_tokens
        assert logprobs == pytest.approx(want_logprobs, abs=LOGPROB_TOLERANCE)
        assert prompt_logprobs[0] is None and want_prompt[0] is None
        assert prompt_logprobs[1:] == pytest.approx(want_prompt[1:], abs=LOGPROB_TOLERANCE)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(HANG_S * 2)
def test_two_ranks_generate_what_one_does_then_stop(model_dir, restored_threads):
    alone = completions(LLM(model=str(model_dir), **SETTINGS))
    with LLM(model=str(model_dir), tensor_parallel_size=2, **SETTINGS) as llm:
        (worker,) = llm.engine._workers.pids
        assert_same_completions(completions(llm), alone)
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
    ({"tensor_parallel_size": 3}, r"does not divide the model's num_attention_heads \(4\); sizes that do: 1, 2, 4"),
    ({"tensor_parallel_size": 2, "distributed_backend": "nccl"}, "'nccl' needs CUDA devices"),
])
def test_bad_settings_are_refused_before_any_worker_starts(model_dir, restored_threads, settings, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        LLM(model=str(model_dir), device="cpu", **SETTINGS, **settings)



@pytest.mark.timeout(HANG_S * 3)
def test_each_new_engine_in_a_process_replaces_the_one_before_and_the_exit_is_clean(model_dir):
    script = [sys.executable, "-m", "tests.engine.tensor_parallel.replacing_engines", str(model_dir)]
    done = subprocess.run(script, capture_output=True, text=True, timeout=HANG_S * 2,
                          env={**os.environ, "PYTHONPATH": str(REPOSITORY)}, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    rounds = [line for line in done.stdout.splitlines() if line.startswith("round")]
    assert len(rounds) == 3 and len({line.split(":", 1)[1] for line in rounds}) == 1, done.stdout
    assert "replaced: closed: a newer tensor-parallel engine in this process replaced it" in done.stdout
