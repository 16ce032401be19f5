"""``autoglm bench pp``: its arithmetic and table on a hand-made results file, and the settings it refuses (the run
itself starts engine processes, which the pipeline-parallel engine tests cover)."""
from __future__ import annotations

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.pipeline_tables import pipeline
from autoglm.bench.pipeline import report
from autoglm.bench.results.results_files import ResultsFile

MACHINE = {"cpu_model": "AMD EPYC", "cpu_count": 2, "accelerators": [], "torch_version": "2.13.0+cpu"}


def document() -> dict:
    sides = [{"num_stages": 1, "torch_threads": 2, "elapsed_s": 4.0, "prompt_tokens": 300, "output_tokens": 100,
              "output_tokens_per_s": 25.0, "total_tokens_per_s": 100.0, "rounds_s": [4.5, 4.0]},
             {"num_stages": 2, "torch_threads": 1, "elapsed_s": 5.0, "prompt_tokens": 300, "output_tokens": 100,
              "output_tokens_per_s": 20.0, "total_tokens_per_s": 80.0, "rounds_s": [5.0, 6.0]}]
    settings = {"stages": 2, "num_prompts": 4, "input_len": 75, "output_len": 25, "rounds": 2}
    return {"settings": settings, "machine": MACHINE, "sides": sides, "same_tokens": True}


def test_the_ratio_is_the_pipelines_total_rate_over_one_process():
    assert report.throughput_ratio(document()) == pytest.approx(0.8)
    assert report.summary_lines(document())[-1] == ("the pipeline runs at 0.80x one process's rate, with the same "
                                                    "greedy tokens")


def test_the_table_has_a_row_per_engine_and_the_ratio_on_the_pipelines():
    table = pipeline(ResultsFile("results/pp.json", document()))
    rows = [line for line in table.splitlines() if line.startswith("| 1 stage") or line.startswith("| 2 stages")]
    assert rows[0].startswith("| 1 stage | 1 x 2 |") and "**0.80x**" in rows[1]
    assert "4 greedy requests of 75 prompt tokens and 25 output tokens" in table


@pytest.mark.parametrize(("flags", "message"), [
    (["--stages", "1"], "--stages must be at least 2"),
    (["--pipeline-parallel-size", "2"], "leave pipeline_parallel_size at 1"),
])
def test_a_run_that_would_compare_nothing_is_refused(tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        main(["pp", "--model", str(tmp_path), *flags])
