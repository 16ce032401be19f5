"""Up to how many rows a CPU linear kernel runs: measured per weight shape (here with a scripted clock, so
nothing is timed), kept per machine in a file, read back by later starts."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from autoglm.kernels import linear_kernels
from autoglm.kernels.linear_kernels import BF16_WEIGHT_AVX512
from autoglm.models.linear_method import CpuKernelLinearMethod, MeasuredRowLimit, measure_row_limits, row_limits
from autoglm.models.linear_method.row_limits import CANDIDATE_ROWS, measure_row_limit

pytestmark = pytest.mark.cpu_isa

WEIGHT = torch.randn(16, 32)
KERNEL_WEIGHT = WEIGHT.to(torch.bfloat16)


class ScriptedClock:
    """Runs both sides once and answers the seconds scripted for them: the kernel's and PyTorch's per row
    count, in the order measure_row_limit takes them."""

    def __init__(self, kernel_s: dict[int, float], torch_s: dict[int, float]) -> None:
        self.answers = [(kernel_s[rows], torch_s[rows]) for rows in CANDIDATE_ROWS]
        self.calls = 0

    def __call__(self, kernel_run, torch_run) -> tuple[float, float]:
        kernel_run()
        torch_run()
        self.calls += 1
        return self.answers[self.calls - 1]


@pytest.fixture(autouse=True)
def fake_kernels(monkeypatch):
    library = type("Library", (), {"linear_bf16_weight_avx512": staticmethod(lambda x, w: x @ w.float().T)})
    monkeypatch.setattr(linear_kernels, "cpu_kernels", lambda: library)


@pytest.mark.parametrize("wins_up_to", [0, 1, 8, 64])
def test_the_limit_is_the_last_row_count_before_pytorch_first_wins(wins_up_to):
    kernel_s = {rows: 1.0 if rows <= wins_up_to else 3.0 for rows in CANDIDATE_ROWS}
    torch_s = dict.fromkeys(CANDIDATE_ROWS, 2.0)
    clock = ScriptedClock(kernel_s, torch_s)
    assert measure_row_limit(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT, timer=clock) == wins_up_to
    won = sum(rows <= wins_up_to for rows in CANDIDATE_ROWS)
    assert clock.calls == min(won + 1, len(CANDIDATE_ROWS))  # none measured past the first loss


def test_a_later_win_does_not_extend_the_limit():
    kernel_s = {1: 1.0, 2: 3.0, 4: 1.0, 8: 1.0, 16: 1.0, 32: 1.0, 64: 1.0}
    clock = ScriptedClock(kernel_s, dict.fromkeys(CANDIDATE_ROWS, 2.0))
    assert measure_row_limit(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT, timer=clock) == 1


def test_both_sides_are_timed_in_turn():
    """Rounds alternate between the two sides, so a busy spell on a shared machine slows both."""
    ticks = []
    kernel_s, torch_s = row_limits.interleaved_best_seconds(lambda: ticks.append("k"), lambda: ticks.append("t"))
    rounds = "".join(ticks[4:])  # after each side's warm-up and sizing call
    blocks = [block for block in rounds.replace("kt", "k t").replace("tk", "t k").split()]
    assert len(blocks) == 2 * row_limits.ROUNDS and all(block[0] == "kt"[i % 2] for i, block in enumerate(blocks))
    assert kernel_s > 0 and torch_s > 0


def test_a_measurement_is_kept_per_shape_and_read_back_by_a_later_start(monkeypatch, tmp_path: Path):
    measured = []

    def fake_measure(kernel, kernel_weight, weight):
        measured.append(tuple(weight.shape))
        return 4

    monkeypatch.setattr(row_limits, "measure_row_limit", fake_measure)
    limits = MeasuredRowLimit(tmp_path / "limits.json")
    assert limits.max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 4
    assert limits.max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 4
    assert measured == [(16, 32)]  # once per shape

    later = MeasuredRowLimit(tmp_path / "limits.json")
    assert later.max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 4
    other = torch.randn(8, 32)
    assert later.max_rows(BF16_WEIGHT_AVX512, other.to(torch.bfloat16), other) == 4
    assert measured == [(16, 32), (8, 32)]  # the file answered for the first shape


def test_a_measurement_holds_only_for_the_thread_count_it_was_made_with(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight: 2)
    MeasuredRowLimit(tmp_path / "limits.json").max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT)
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight: 6)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        assert MeasuredRowLimit(tmp_path / "limits.json").max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 6
    finally:
        torch.set_num_threads(threads)


def test_an_unwritable_cache_still_measures(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight: 2)
    blocked = tmp_path / "file"
    blocked.write_text("")
    limits = MeasuredRowLimit(blocked / "limits.json")  # its folder is a file
    assert limits.max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 2


def test_a_stored_zero_is_read_back_not_measured_again(monkeypatch, tmp_path: Path):
    """0 means PyTorch already wins at one row: a kept answer like any other."""
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight: 0)
    MeasuredRowLimit(tmp_path / "limits.json").max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT)

    def must_not_measure(kernel, kernel_weight, weight):
        raise AssertionError("measured again")

    monkeypatch.setattr(row_limits, "measure_row_limit", must_not_measure)
    assert MeasuredRowLimit(tmp_path / "limits.json").max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 0


def test_a_floor_raises_the_measured_limit_but_the_file_keeps_the_measurement(monkeypatch, tmp_path: Path):
    """Speculative decoding's floor: a verification's rows take the kernel whatever was measured."""
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight: 2)
    assert MeasuredRowLimit(tmp_path / "limits.json", min_rows=5).max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT,
                                                                            WEIGHT) == 5
    assert MeasuredRowLimit(tmp_path / "limits.json").max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT, WEIGHT) == 2
    assert MeasuredRowLimit(tmp_path / "limits.json", min_rows=1).max_rows(BF16_WEIGHT_AVX512, KERNEL_WEIGHT,
                                                                            WEIGHT) == 2


def a_model_measuring_in(cache_file: Path) -> torch.nn.Module:
    """Three projections of two weight shapes through the kernel, their limits measured (kept in ``cache_file``)."""
    model = torch.nn.ModuleList([torch.nn.Linear(32, 16, bias=False), torch.nn.Linear(32, 16, bias=False),
                                 torch.nn.Linear(32, 8, bias=False)])
    method = CpuKernelLinearMethod(BF16_WEIGHT_AVX512, MeasuredRowLimit(cache_file))
    for layer in model:
        layer.linear_method = method
        method.process_weights_after_loading(layer)
    return model


def test_measuring_ahead_of_the_first_step_says_so_once_and_a_later_start_measures_nothing(monkeypatch, tmp_path,
                                                                                           caplog):
    measured = []
    monkeypatch.setattr(row_limits, "measure_row_limit", lambda kernel, kernel_weight, weight:
                        measured.append(tuple(weight.shape)) or 4)
    with caplog.at_level(logging.INFO, logger="autoglm"):
        measure_row_limits(a_model_measuring_in(tmp_path / "limits.json"))
    said = [record.getMessage() for record in caplog.records if record.name.endswith("cpu_kernel")]
    assert sorted(measured) == [(8, 32), (16, 32)]
    assert len(said) == 2 and "2 weight shapes" in said[0]
    assert said[0].startswith("measuring up to how many rows the CPU kernels beat PyTorch's matmul on this machine")
    assert said[1].startswith("row limits measured in ")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="autoglm"):
        measure_row_limits(a_model_measuring_in(tmp_path / "limits.json"))
    assert not caplog.records and len(measured) == 2
