"""The figures of a ``bench compare-llamacpp`` file: its own table per measure, and the glance table's
llama.cpp column, filled where a CPU's comparison file is named and pending where none is."""
from __future__ import annotations

from pathlib import Path

import pytest

from autoglm.bench.figures.markers import MarkerError
from autoglm.bench.figures.render import render_document
from tests.bench.test_glance_table import EPYC, XEON, latency, throughput, write

FEATURES = {"avx2": True, "avx512": True, "avx512_vnni": True, "avx512_bf16": False}


def sides(engine_decode: float, llama_decode: float, engine_prompt: float, llama_prompt: float,
          file_type: str) -> dict:
    return {"engine": {"decode_tokens_per_s": engine_decode, "prompt_tokens_per_s": engine_prompt},
            "llama_cpp": {"decode_tokens_per_s": llama_decode, "prompt_tokens_per_s": llama_prompt,
                          "file_type": file_type},
            "ratios": {"decode": engine_decode / llama_decode, "prompt": engine_prompt / llama_prompt}}


def comparison(folder: Path, name: str, machine: dict, precisions: dict) -> str:
    return write(folder, name, {
        "machine": machine,
        "settings": {"threads": 2, "prompt_test": "pp512", "decode_test": "tg128"},
        "llama_cpp": {"build_commit": "0c1e570", "build_number": 1, "cpu_backend_features": FEATURES},
        "precisions": precisions})


EPYC_PRECISIONS = {"bfloat16": sides(21.5, 38.4, 300.0, 250.0, "BF16"),
                   "int4": sides(47.9, 107.3, 200.0, 400.0, "Q4_0")}


def test_a_comparison_file_is_a_table_per_measure(tmp_path):
    name = comparison(tmp_path, "llamacpp-epyc.json", EPYC, EPYC_PRECISIONS)
    rendered = render_document(f"<!-- figures:compare-llamacpp {name} -->\n<!-- /figures -->", tmp_path)
    assert rendered.splitlines()[1:] == [
        "Measured on AMD EPYC, 2 CPUs, AVX-512 with VNNI, AVX512-BF16, no AMX; torch 2.13.0+cpu "
        "([`llamacpp-epyc.json`](llamacpp-epyc.json)):",
        "",
        "| batch-1 decode (tg128), tok/s | engine | llama.cpp | ratio |",
        "| --- | ---: | ---: | ---: |",
        "| bfloat16 | 21.5 | 38.4 (BF16) | 0.56x |",
        "| int4 | 47.9 | 107.3 (Q4_0) | 0.45x |",
        "",
        "| prompt processing (pp512), tok/s | engine | llama.cpp | ratio |",
        "| --- | ---: | ---: | ---: |",
        "| bfloat16 | 300.0 | 250.0 (BF16) | 1.20x |",
        "| int4 | 200.0 | 400.0 (Q4_0) | 0.50x |",
        "",
        "2 threads on both sides; llama.cpp build 0c1e570 (1), its CPU backend built for AVX2, AVX512, "
        "AVX512_VNNI, not AVX512_BF16. Ratio: the engine's rate over llama.cpp's, above 1x where the engine is "
        "faster.",
        "<!-- /figures -->",
    ]


def glance_rows(folder: Path, *words: str) -> list[str]:
    marker = f"<!-- figures:glance 128 {' '.join(words)} -->\n<!-- /figures -->"
    return render_document(marker, folder).splitlines()[3:-1]


def test_the_glance_table_names_llama_cpps_decode_where_a_cpu_has_a_comparison(tmp_path):
    words = [latency(tmp_path, "lat-epyc.json", EPYC, 25.0, 0.5), throughput(tmp_path, "tp-epyc.json", EPYC, 270),
             "llamacpp=" + comparison(tmp_path, "llamacpp-epyc.json", EPYC, EPYC_PRECISIONS),
             latency(tmp_path, "lat-xeon.json", XEON, 5.0, 2.0), throughput(tmp_path, "tp-xeon.json", XEON, 50)]
    epyc, xeon = glance_rows(tmp_path, *words)
    assert "([latency](lat-epyc.json), [throughput](tp-epyc.json), [llama.cpp](llamacpp-epyc.json))" in epyc
    assert epyc.endswith("| 27.0 tok/s (**2.70x**) | **0.56x** of 38.4 tok/s |")
    assert xeon.endswith("| 5.0 tok/s (**0.50x**) | pending |")


def test_a_comparison_without_bfloat16_leaves_the_cell_not_measured(tmp_path):
    int4_only = {"int4": EPYC_PRECISIONS["int4"]}
    words = [latency(tmp_path, "lat.json", EPYC, 25.0, 0.5), throughput(tmp_path, "tp.json", EPYC, 270),
             "llamacpp=" + comparison(tmp_path, "llamacpp.json", EPYC, int4_only)]
    assert glance_rows(tmp_path, *words)[0].endswith("| not measured |")


@pytest.mark.parametrize(("order", "message"), [
    (("lat", "tp", "other"), "different machines; a row is one CPU's"),
    (("lat", "llamacpp", "tp"), "give llamacpp=FILE once per CPU, right after its latency and throughput files"),
    (("lat", "tp", "llamacpp", "llamacpp"), "once per CPU"),
    (("lat", "tp", "speed"), "once per CPU"),
])
def test_a_comparison_belongs_after_its_own_cpus_two_files(tmp_path, order, message):
    words = {"lat": latency(tmp_path, "lat.json", EPYC, 25.0, 0.5), "tp": throughput(tmp_path, "tp.json", EPYC, 270),
             "llamacpp": "llamacpp=" + comparison(tmp_path, "llamacpp.json", EPYC, EPYC_PRECISIONS),
             "other": "llamacpp=" + comparison(tmp_path, "llamacpp-xeon.json", XEON, EPYC_PRECISIONS),
             "speed": "speed=" + comparison(tmp_path, "speed.json", EPYC, EPYC_PRECISIONS)}
    with pytest.raises(MarkerError, match=message):
        glance_rows(tmp_path, *(words[word] for word in order))
