"""The KV pool leaves the profiled steps' memory free on an accelerator."""
from __future__ import annotations

import pytest
import torch

from autoglm.models import load_model
from autoglm.runner.kv_cache import DEFAULT_ACCELERATOR_FRACTION, DEFAULT_CPU_KV_BYTES
from autoglm.runner.memory_profile import fit_kv_budget, forward_peak_bytes, run_profiled_step, step_reserve_bytes
from tests.tiny_models import make_tiny_checkpoint

GIB = 2**30


def test_auto_takes_its_share_of_what_the_steps_leave_free():
    assert fit_kv_budget(None, free_bytes=10 * GIB, reserve_bytes=2 * GIB, full_need_bytes=100 * GIB) == \
        int(8 * GIB * DEFAULT_ACCELERATOR_FRACTION)
    assert fit_kv_budget(None, free_bytes=10 * GIB, reserve_bytes=2 * GIB, full_need_bytes=GIB) == GIB


def test_the_cpu_keeps_its_default_and_a_set_budget():
    assert fit_kv_budget(None, free_bytes=None, reserve_bytes=0, full_need_bytes=100 * GIB) == DEFAULT_CPU_KV_BYTES
    assert fit_kv_budget(5 * GIB, free_bytes=None, reserve_bytes=0, full_need_bytes=GIB) == 5 * GIB


def test_a_set_budget_that_leaves_steps_too_little_is_refused_naming_what_fits():
    assert fit_kv_budget(7 * GIB, free_bytes=10 * GIB, reserve_bytes=2 * GIB, full_need_bytes=GIB) == 7 * GIB
    with pytest.raises(ValueError, match=r"kv_cache_memory of 9.00 GiB does not fit.*allowed: at most 8.00 GiB"):
        fit_kv_budget(9 * GIB, free_bytes=10 * GIB, reserve_bytes=2 * GIB, full_need_bytes=GIB)


def test_nothing_is_profiled_off_cuda():
    assert step_reserve_bytes(torch.nn.Identity(), torch.device("cpu"), 2048, 64, decode_graphs=True) == 0


def test_the_profiled_step_samples_its_rows_the_costliest_way(tmp_path):
    """The step the profile measures, run on the CPU: a forward, then every row sampled."""
    model, _ = load_model(make_tiny_checkpoint("qwen2", tmp_path), torch.float32, torch.device("cpu"))
    assert run_profiled_step(model, 16, 4, torch.device("cpu")).shape == (4,)
    assert run_profiled_step(model, 16, 0, torch.device("cpu")).shape == (0,)  # a decode graph's forward alone


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_profiled_peak_grows_with_the_step(tmp_path):
    model, _ = load_model(make_tiny_checkpoint("qwen2", tmp_path), torch.float32, torch.device("cuda"))
    small, large = (forward_peak_bytes(model, tokens, 8, torch.device("cuda")) for tokens in (8, 1024))
    assert 0 < small < large
