"""``bench quant-kernels`` measures every candidate, and docs/QUANTIZATION.md matches its results files."""
from __future__ import annotations

import json
from pathlib import Path

from autoglm.bench.cli import main as bench_main
from autoglm.bench.figures.command import main as figures_main
from autoglm.bench.figures.render import render_document

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_quant_kernels_times_each_candidate_and_renders_as_a_table(tmp_path, capsys) -> None:
    results = tmp_path / "kernels.json"
    assert bench_main(["quant-kernels", "--quick", "--output-json", str(results)]) == 0
    timings = json.loads(results.read_text())["timings"]
    kernels = {timing["kernel"] for timing in timings}
    assert {"int8 _weight_int8pack_mm", "int4 _weight_int4pack_mm_for_cpu", "int8 dequantize + F.linear"} <= kernels
    assert all(timing["seconds"] > 0 for timing in timings)
    assert "int8 _weight_int8pack_mm" in capsys.readouterr().out
    table = render_document(f"<!-- figures:quant-kernels {results.name} -->\n<!-- /figures -->\n", tmp_path)
    assert "| 896x896 | int8 _weight_int8pack_mm |" in table and "| 1 rows (us) | 3 rows (us) |" in table


def test_the_quantization_doc_matches_its_results_files(capsys) -> None:
    assert figures_main([str(DOCS / "QUANTIZATION.md"), "--check"]) == 0, capsys.readouterr().out
