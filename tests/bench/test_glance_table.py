"""docs/PERFORMANCE.md opens with one row per CPU measured, generated like every other figure: the engine's
batch-1 decode, TTFT and mixed-batch throughput beside their ratio to transformers', llama.cpp pending."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoglm.bench.figures.markers import MarkerError
from autoglm.bench.figures.render import render_document

DOCS = Path(__file__).resolve().parents[2] / "docs"
EPYC = {"cpu_model": "AMD EPYC", "cpu_count": 2, "torch_version": "2.13.0+cpu",
        "cpu_flags": {"avx512f": True, "avx512_vnni": True, "avx512_bf16": True, "amx_bf16": False}}
XEON = {**EPYC, "cpu_model": "Intel(R) Xeon(R) Processor", "cpu_flags": {**EPYC["cpu_flags"], "avx512_bf16": False}}
SCREEN_LINES = 40


def write(folder: Path, name: str, document: dict) -> str:
    (folder / name).write_text(json.dumps(document))
    return name


def latency(folder: Path, name: str, machine: dict, decode: float, ttft_s: float) -> str:
    engine = {"mean_ttft_s": ttft_s, "decode_tokens_per_s": decode}
    baseline = {"mean_ttft_s": 1.0, "decode_tokens_per_s": 10.0}
    return write(folder, name, {"machine": machine, "input_lens": {"128": {"autoglm": engine, "transformers": baseline}}})


def throughput(folder: Path, name: str, machine: dict, output_tokens: int) -> str:
    sides = {"autoglm": {"output_tokens": output_tokens, "elapsed_s": 10.0},
             "transformers": {"output_tokens": 100, "elapsed_s": 10.0}}
    return write(folder, name, {"machine": machine, "workloads": {"mixed": sides}})


def glance(*names: str, lengths: str = "128") -> str:
    return f"<!-- figures:glance {lengths} {' '.join(names)} -->\n<!-- /figures -->"


def test_each_cpu_is_a_row_of_figures_and_their_ratios_to_transformers(tmp_path):
    files = [latency(tmp_path, "lat-epyc.json", EPYC, decode=25.0, ttft_s=0.5),
             throughput(tmp_path, "tp-epyc.json", EPYC, output_tokens=270),
             latency(tmp_path, "lat-xeon.json", XEON, decode=5.0, ttft_s=2.0),
             throughput(tmp_path, "tp-xeon.json", XEON, output_tokens=50)]
    rows = render_document(glance(*files), tmp_path).splitlines()[3:5]
    assert rows[0] == ("| AMD EPYC, 2 CPUs, AVX-512 with VNNI, AVX512-BF16, no AMX ([latency](lat-epyc.json), "
                       "[throughput](tp-epyc.json)) | 25.0 tok/s (**2.50x**) | 500 ms (**2.00x**) | "
                       "27.0 tok/s (**2.70x**) | pending |")
    assert rows[1].startswith("| Intel Xeon Processor, 2 CPUs, AVX-512 with VNNI, no AVX512-BF16/AMX (")
    assert rows[1].endswith("| 5.0 tok/s (**0.50x**) | 2.00 s (**0.50x**) | 5.0 tok/s (**0.50x**) | pending |")


def test_a_prompt_length_a_cpu_did_not_measure_says_so(tmp_path):
    files = [latency(tmp_path, "lat.json", EPYC, 25.0, 0.5), throughput(tmp_path, "tp.json", EPYC, 270)]
    rendered = render_document(glance(*files, lengths="128,2048"), tmp_path)
    assert "batch-1 decode, 2048-token prompt" in rendered
    assert "| 25.0 tok/s (**2.50x**) | not measured | 500 ms (**2.00x**) | not measured |" in rendered


@pytest.mark.parametrize(("machines", "message"), [
    ((EPYC, XEON), "different machines; a row is one CPU's"),
    ((EPYC,), "each CPU's latency file, then its throughput file"),
])
def test_a_row_takes_one_cpus_two_files(tmp_path, machines, message):
    files = [latency(tmp_path, "lat.json", machines[0], 25.0, 0.5)]
    files += [throughput(tmp_path, "tp.json", machine, 270) for machine in machines[1:]]
    with pytest.raises(MarkerError, match=message):
        render_document(glance(*files), tmp_path)


def test_the_performance_doc_opens_with_the_glance_table_within_a_screen():
    lines = (DOCS / "PERFORMANCE.md").read_text().splitlines()
    first_section = next(line for line in lines if line.startswith("## "))
    assert first_section == "## At a glance"
    table = [line for line in lines[:SCREEN_LINES] if line.startswith("| ") and line.endswith("| pending |")]
    assert len(table) == 2, table  # llama.cpp not yet beside the engine: without bfloat16 units, AMX
    compared = [line for line in lines[:SCREEN_LINES] if line.startswith("| AMD EPYC") and "x** of " in line]
    assert len(compared) == 1, "the AMD EPYC row gives llama.cpp's figure"
    assert "llama.cpp at the same precision" in " ".join(lines[:SCREEN_LINES])
