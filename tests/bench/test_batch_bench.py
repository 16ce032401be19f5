"""``autoglm bench batch``: its figures computed from a hand-made results file, its options refused by name,
and one real run on the embedded model whose results file renders the docs' table."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.batch import measure, report
from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from autoglm.bench.lib.server import BenchServer
from autoglm.model_paths import DEFAULT_MODEL_DIR
from tests.bench.test_docs_figures import CPU
from tests.server import live_server

TABLE_MARKER = "<!-- figures:batch batch.json -->\n<!-- /figures -->\n"


def phase(median_ms: float | None, p90_ms: float | None, errors: tuple[str, ...] = ()) -> dict:
    return {"metrics": {"ttft": {"median_ms": median_ms, "p90_ms": p90_ms}}, "errors": list(errors)}


def document(beside_median_ms: float = 12.0, status: str = "completed", failed: int = 0) -> dict:
    return {"settings": {"interactive_requests": 4, "batch_lines": 200, "input_len": 128, "output_len": 64},
            "machine": CPU, "alone": phase(10.0, 11.0), "beside_batch": {**phase(beside_median_ms, 20.0),
                                                                         "during_batch": 4},
            "batch": {"status": status, "lines": 200, "completed": 200 - failed, "failed": failed,
                      "duration_s": 40.0, "lines_per_s": (200 - failed) / 40.0,
                      "errors": ["line refused"] if failed else []}}


def test_the_ratio_and_its_target_are_computed_from_the_medians():
    assert report.ttft_ratio(document()) == pytest.approx(1.2)
    assert report.within_target(document())
    assert not report.within_target(document(beside_median_ms=15.5))
    assert report.failures(document()) == []
    lines = report.summary_lines(document())
    assert lines[0] == ("interactive TTFT, 4 requests one at a time: median 10.0 ms alone, 12.0 ms beside the batch "
                        "(1.20x, within the 1.5x target); p90 11.0 ms and 20.0 ms")
    assert lines[1] == "batch: 200 of 200 lines in 40.0 s (5.00 lines/s), status completed"


def test_failed_lines_and_requests_without_a_first_token_are_reported():
    broken = document(status="failed", failed=3)
    broken["beside_batch"] = {**phase(None, None, ("HTTP 500: boom",)), "during_batch": 4}
    assert report.failures(broken) == ["beside_batch request failed: HTTP 500: boom",
                                       "batch failed, 3 of 200 lines failed: line refused"]
    assert report.summary_lines(broken)[0] == ("interactive TTFT: no beside_batch request got a first token; "
                                               "errors: HTTP 500: boom")


def test_the_table_and_the_inline_ratio(tmp_path):
    (tmp_path / "batch.json").write_text(json.dumps(document(beside_median_ms=16.0)))
    rendered = render_document(TABLE_MARKER + "<!-- figure:batch-ttft-ratio batch.json --><!-- /figure -->",
                               tmp_path)
    assert "| 4 interactive chat requests, one at a time, alone | 10.0 ms | 11.0 ms |  |" in rendered
    assert "| the same beside a batch of 200 lines | 16.0 ms | 20.0 ms | **1.60x** (beyond 1.5x) |" in rendered
    assert "ended completed in 40.00 s: 200 lines done, 5.00 lines/s." in rendered
    assert "-->1.60x<!-- /figure -->" in rendered


@pytest.mark.parametrize("option", ["--batch-lines", "--interactive-requests", "--output-len"])
def test_counts_must_be_positive(option, capsys):
    with pytest.raises(SystemExit):
        main(["batch", option, "0"])
    assert f"argument {option}: expected a whole number of at least 1, got '0'" in capsys.readouterr().err


def serve_in_process(port, model, serve_args, log_path) -> BenchServer:
    """The app in this process rather than a new one: the same routes without a second PyTorch start."""
    assert model is None and "--data-dir" in serve_args
    running = live_server.start_server(DEFAULT_MODEL_DIR)
    server = BenchServer(running.url, pid=None)
    server.stop = running.stop
    return server


@pytest.mark.timeout(120)
def test_the_bench_runs_on_the_embedded_model_and_its_table_renders(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "start_server", serve_in_process)
    out = tmp_path / "batch.json"
    status = main(["batch", "--batch-lines", "6", "--interactive-requests", "2", "--input-len", "8",
                   "--output-len", "4", "--output-json", str(out)])
    assert status == 0
    results = json.loads(out.read_text())
    assert results["settings"]["model"] == "glm4-tiny-shakespeare" and results["machine"]["cpu_model"] is not None
    assert results["batch"]["status"] == "completed"
    assert (results["batch"]["lines"], results["batch"]["completed"], results["batch"]["failed"]) == (6, 6, 0)
    for phase_name in ("alone", "beside_batch"):
        assert results[phase_name]["metrics"]["completed"] == 2 and results[phase_name]["errors"] == []
        assert results[phase_name]["metrics"]["total_output_tokens"] == 2 * 4
    rendered = render_document(TABLE_MARKER, tmp_path)
    assert "| 2 interactive chat requests, one at a time, alone |" in rendered
    assert f"**{report.ttft_ratio(results):.2f}x**" in rendered
