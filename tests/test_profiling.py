"""The step profiler's count of which path each projection took, and its split of the forward pass."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from autoglm.bench.results.profile_report import linear_paths_table
from autoglm.models.linear import Linear
from autoglm.models.linear_method import UnquantizedLinearMethod
from autoglm.profiling import COMMUNICATION, FORWARD, LINEAR, StepProfiler


class RowsPathMethod(UnquantizedLinearMethod):
    """Names a 'kernel' path for steps of at most two rows, as a CPU kernel method does."""

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        return "kernel" if x.shape[0] <= 2 else "torch"


def test_each_projection_counts_the_paths_its_calls_took():
    model = nn.ModuleDict({"qkv_proj": Linear(4, 4, False, RowsPathMethod()),
                           "down_proj": Linear(4, 4, False, UnquantizedLinearMethod())})
    profiler = StepProfiler(torch.device("cpu"))
    profiler.count_linear_paths(model)
    for rows in (1, 2, 5):
        for layer in model.values():
            layer(torch.randn(rows, 4))
    paths = profiler.result().linear_paths
    assert paths == {"qkv_proj": {"kernel": 2, "torch": 1}, "down_proj": {"torch": 3}}
    assert profiler.result().to_dict()["linear_paths"] == paths
    table = linear_paths_table(paths)
    assert table.splitlines()[0] == "which path each projection took (calls)"
    assert "qkv_proj" in table and "kernel" in table
    profiler.reset()
    assert profiler.result().linear_paths == {}


def test_communication_inside_a_layer_counts_as_communication_only():
    now = iter(range(100))  # each reading of the clock is one second later
    profiler = StepProfiler(torch.device("cpu"), clock=lambda: float(next(now)))
    with profiler.phase(FORWARD), profiler.forward_part(LINEAR):
        with profiler.forward_part(COMMUNICATION):
            pass
    parts = profiler.result().forward_parts_s
    # Readings: forward 0, linear 1, communication 2 and 3, linear 4, forward 5.
    assert (parts[COMMUNICATION], parts[LINEAR], profiler.result().phases_s[FORWARD]) == (1.0, 2.0, 5.0)
    assert sum(parts.values()) == pytest.approx(profiler.result().phases_s[FORWARD])
