"""The documents' figures are generated from ``docs/results/``: the repository's docs match their
results files, a changed figure is caught and regenerated, and every figure names its machine."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoglm.bench.figures.command import main
from autoglm.bench.figures.markers import MarkerError
from autoglm.bench.figures.render import render_document
from autoglm.bench.results.machine import describe_machine
from autoglm.bench.results.report import RECORDED_CPU_FLAGS, is_local_server, machine_info
from autoglm.bench.results.roofline import LinearPathRate, LinearPaths
from autoglm.bench.results.roofline import MatmulRate, Roofline

DOCS = Path(__file__).resolve().parents[2] / "docs"
CPU = {"cpu_model": "AMD EPYC", "cpu_count": 2, "accelerators": [], "torch_version": "2.13.0+cpu",
       "cpu_flags": {"avx512f": True, "avx512_vnni": True, "avx512_bf16": True, "amx_bf16": False}}


def latency_file(folder: Path, name: str, machine: dict, engine_decode: float) -> str:
    side = {"compute_dtype": "bfloat16", "weight_dtype": "bfloat16", "mean_ttft_s": 0.5}
    document = {"machine": machine, "input_lens": {"128": {
        "autoglm": {**side, "decode_tokens_per_s": engine_decode},
        "transformers": {**side, "mean_ttft_s": 1.0, "decode_tokens_per_s": 10.0}}}}
    (folder / name).write_text(json.dumps(document))
    return name


@pytest.mark.parametrize("document", ["PERFORMANCE.md", "RELIABILITY.md", "TENANTS.md", "MODELS.md"])
def test_the_repository_docs_match_their_results_files(document, capsys):
    assert main([str(DOCS / document), "--check"]) == 0, capsys.readouterr().out


def test_ratios_are_computed_from_the_raw_numbers():
    """The no-prefix-cache row once said 3.93x where its own rates give 9.40 / 3.70."""
    text = (DOCS / "PERFORMANCE.md").read_text()
    assert "| shared-prefix | engine, no prefix cache | 217.8 | 9.4 | 169.2 | 2.54x | 65% |" in text


def test_a_retyped_figure_is_caught_and_regenerated(tmp_path, capsys):
    shutil.copytree(DOCS, tmp_path / "docs")
    document = tmp_path / "docs" / "PERFORMANCE.md"
    document.write_text(document.read_text().replace("| **2.12x** |", "| **3.93x** |"))
    assert main([str(document), "--check"]) == 1
    assert "-| 128 | 752 ms" in capsys.readouterr().out
    assert main([str(document)]) == 0
    assert main([str(document), "--check"]) == 0


def test_a_new_results_file_takes_only_a_marker(tmp_path):
    name = latency_file(tmp_path, "latency-epyc.json", CPU, engine_decode=25.0)
    text = (f"Decode is <!-- figure:decode-ratio {name} 128 --><!-- /figure --> faster.\n"
            f"<!-- figures:latency {name} -->\nstale\n<!-- /figures -->\n")
    rendered = render_document(text, tmp_path)
    assert "Decode is <!-- figure:decode-ratio latency-epyc.json 128 -->2.50x<!-- /figure --> faster." in rendered
    assert "Measured on AMD EPYC, 2 CPUs, AVX-512 with VNNI, AVX512-BF16, no AMX; torch 2.13.0+cpu" in rendered
    assert "| 128 | 500 ms | 1.00 s | **2.00x** | 25.0 tok/s | 10.0 tok/s | **2.50x** |" in rendered
    assert "stale" not in rendered


def test_an_inline_figure_takes_a_format(tmp_path):
    name = latency_file(tmp_path, "latency.json", CPU, engine_decode=25.0)
    text = f"<!-- figure:value {name} input_lens.128.autoglm.decode_tokens_per_s '{{:.0f}} tok/s' --><!-- /figure -->"
    assert render_document(text, tmp_path).endswith("-->25 tok/s<!-- /figure -->")


def test_a_difference_is_signed_and_takes_a_format(tmp_path):
    slow, fast = latency_file(tmp_path, "slow.json", CPU, 10.0), latency_file(tmp_path, "fast.json", CPU, 25.0)
    path = "input_lens.128.autoglm.decode_tokens_per_s"
    text = (f"<!-- figure:difference {fast} {path} {slow} {path} --><!-- /figure --> and "
            f"<!-- figure:difference {slow} {path} {fast} {path} '{{:+.0f}} tok/s' --><!-- /figure -->")
    rendered = render_document(text, tmp_path)
    assert "-->+15.00<!-- /figure --> and " in rendered and rendered.endswith("-->-15 tok/s<!-- /figure -->")


def test_a_table_quotes_one_machine(tmp_path):
    gpu = {**CPU, "accelerators": ["NVIDIA H200"]}
    text = (f"<!-- figures:latency {latency_file(tmp_path, 'cpu.json', CPU, 25.0)} "
            f"{latency_file(tmp_path, 'gpu.json', gpu, 25.0)} -->\n<!-- /figures -->")
    with pytest.raises(MarkerError, match="different machines"):
        render_document(text, tmp_path)


@pytest.mark.parametrize("text, message", [
    ("a\n<!-- figure:decode-ratio x.json 128 -->2x\n", "line 2: .* has no <!-- /figure -->"),
    ("<!-- figures:pie x.json -->\n<!-- /figures -->", "no 'pie' figure as a table; known: roofline-limits"),
    ("<!-- figure:value x.json a.b '{:.1f}' --><!-- /figure -->", "no results file"),
])
def test_bad_markers_say_what_is_wrong(tmp_path, text, message):
    with pytest.raises(MarkerError, match=message):
        render_document(text, tmp_path)


def test_a_results_file_without_a_machine_is_refused(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(MarkerError, match="old.json records no machine"):
        render_document("<!-- figure:machine old.json --><!-- /figure -->", tmp_path)


def test_machines_are_described_by_their_devices():
    assert describe_machine({"accelerators": ["NVIDIA H200"], "torch_version": "2.11.0+cu130"}) == (
        "one NVIDIA H200; torch 2.11.0+cu130")
    no_bf16 = {**CPU, "cpu_model": "Intel(R) Xeon(R) Processor @ 2.80GHz",
               "cpu_flags": {**CPU["cpu_flags"], "avx512_bf16": False}}
    assert describe_machine(no_bf16).startswith(
        "Intel Xeon Processor @ 2.80GHz, 2 CPUs, AVX-512 with VNNI, no AVX512-BF16/AMX")


def test_a_cpu_without_avx512_is_named_by_its_avx2():
    flags = {"avx2": True, "fma": True, "avx512f": False, "avx512_bf16": False, "amx_bf16": False}
    assert describe_machine({"cpu_model": "Some CPU", "cpu_flags": flags}) == "Some CPU, AVX2, no AVX-512, no AVX512-BF16/AMX"


def test_results_record_the_instruction_sets_and_accelerators():
    machine = machine_info()
    assert set(machine["cpu_flags"] or {}) <= set(RECORDED_CPU_FLAGS)
    assert isinstance(machine["accelerators"], list)
    assert describe_machine(machine)


@pytest.mark.parametrize("url, local", [
    ("http://127.0.0.1:8000", True), ("http://localhost:8000", True), ("http://[::1]:8000", True),
    ("http://10.0.0.2:8000", False), ("https://api.example.com", False),
])
def test_a_serve_result_records_the_machine_only_when_the_server_runs_on_it(url, local):
    assert is_local_server(url) is local


def test_a_run_on_a_forced_cpu_path_records_and_names_the_hidden_flags(monkeypatch):
    from autoglm import platforms

    monkeypatch.setattr(platforms, "reported_cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, "avx512_bf16,amx_bf16")
    machine = machine_info()
    assert machine["cpu_flags"]["avx512_bf16"] is True  # the CPU's own flags
    assert machine["cpu_flags_disabled"] == ["amx_bf16", "avx512_bf16"]
    assert "run as without amx_bf16/avx512_bf16 (AUTOGLM_CPU_DISABLE_FLAGS)" in describe_machine(machine)


def test_soak_figures_are_computed_from_the_phases_and_the_memory(tmp_path):
    def phase(p99_ms: float, statuses: dict) -> dict:
        return {"duration_s": 60, "victim_requests": statuses["victim ok"],
                "itl": {"mean_ms": 5.0, "median_ms": 4.0, "p90_ms": 6.0, "p99_ms": p99_ms}, "statuses": statuses}

    document = {"machine": CPU, "settings": {}, "baseline": phase(10.0, {"victim ok": 100}),
                "hostile": phase(25.0, {"big prompt 400": 7, "disconnect 200": 3, "victim ok": 90}),
                "server_rss_bytes": {"before": 400 * 2**20, "after": 404 * 2**20}}
    (tmp_path / "soak.json").write_text(json.dumps(document))
    text = ("<!-- figures:soak soak.json -->\n<!-- /figures -->\n"
            "Gaps: <!-- figure:soak-itl-ratio soak.json --><!-- /figure -->, memory: "
            "<!-- figure:soak-rss-growth soak.json --><!-- /figure -->, "
            "<!-- figure:soak-requests soak.json --><!-- /figure --> requests.")
    rendered = render_document(text, tmp_path)
    assert "| hostile | 90 | 4 ms | 25 ms | big prompt 400: 7, disconnect 200: 3 |" in rendered
    assert "200 requests in all; p99 ITL with / without the hostile load: **2.50x**" in rendered
    assert "400 MiB before the hostile phase, 404 MiB after (**+1.0%**)" in rendered
    assert "Gaps: <!-- figure:soak-itl-ratio soak.json -->2.50x<!-- /figure -->" in rendered
    assert "memory: <!-- figure:soak-rss-growth soak.json -->+1.0%<!-- /figure -->" in rendered
    assert "-->200<!-- /figure --> requests." in rendered


def test_a_roofline_shows_each_linear_path_and_the_kernels_this_cpu_lacks(tmp_path):
    rates = [LinearPathRate("torch", "bfloat16", "bfloat16", 1, 1024, 262144, 0.05),
             LinearPathRate("torch", "bfloat16", "bfloat16", 64, 1024, 1024, 0.001),
             LinearPathRate("bf16-dot-avx512", "bfloat16", "bfloat16", 1, 1024, 262144, 0.01),
             LinearPathRate("bf16-dot-avx512", "bfloat16", "bfloat16", 64, 1024, 1024, 0.002)]
    roofline = Roofline("cpu", 2, "bfloat16", 50e9, 40e9, [MatmulRate("bfloat16", 64, 1024, 1024, 1e11)],
                        linear_paths=LinearPaths(rates, {"bf16-dot-avx512": 16}, {"bf16-weight-avx2": ["avx2"]}))
    (tmp_path / "roofline.json").write_text(json.dumps({**roofline.to_dict(), "machine": CPU}))
    rendered = render_document("<!-- figures:linear-paths roofline.json --><!-- /figures -->", tmp_path)
    assert "| torch | bfloat16 x bfloat16 | 10.7 | 134 | - |" in rendered  # 512 MiB in 50 ms; 2*64*1024^2 in 1 ms
    assert "| bf16-dot-avx512 | bfloat16 x bfloat16 | 53.7 | 67 | 16 |" in rendered
    assert "Not on this CPU: bf16-weight-avx2 (needs avx2)." in rendered
    inline = render_document("<!-- figure:gemv-bandwidth roofline.json bf16-dot-avx512 --><!-- /figure -->", tmp_path)
    assert "-->54 GB/s<!--" in inline
    with pytest.raises(ValueError, match="0 one-row rates of path 'bf16-weight-avx2'"):
        render_document("<!-- figure:gemv-bandwidth roofline.json bf16-weight-avx2 --><!-- /figure -->", tmp_path)


def test_a_profiled_run_shows_which_path_each_projection_took(tmp_path):
    profile = {"linear_paths": {"qkv_proj": {"bf16-dot-avx512": 30, "torch": 2}, "lm_head": {"torch": 4}}}
    document = {"machine": CPU, "workloads": {"mixed": {"autoglm": {"profile": profile}}}}
    (tmp_path / "throughput.json").write_text(json.dumps(document))
    rendered = render_document("<!-- figures:linear-path-calls throughput.json mixed --><!-- /figures -->", tmp_path)
    assert "| projection | bf16-dot-avx512 | torch |" in rendered
    assert "| qkv_proj | 30 | 2 |" in rendered and "| lm_head | 0 | 4 |" in rendered


def test_a_quantized_decode_is_bounded_by_the_bytes_its_weights_and_head_take(tmp_path):
    from tests.bench.test_roofline import ROOFLINE  # 8 GB/s; int8 weights with a bfloat16 head read 1,400 bytes
    (tmp_path / "roofline.json").write_text(json.dumps(ROOFLINE.to_dict()))
    side = {"compute_dtype": "bfloat16", "weight_dtype": "int8", "weight_group_size": None,
            "lm_head_weight_dtype": "bfloat16", "mean_ttft_s": 0.5, "decode_tokens_per_s": 8e9 / 1_400 / 2}
    settings = {"engine": {"quantization": "int8", "quantization_group_size": None, "quantize_lm_head": False,
                           "kv_cache_dtype": "int8"}}
    (tmp_path / "latency.json").write_text(json.dumps({"machine": CPU, "settings": settings,
                                                       "input_lens": {"128": {"autoglm": side}}}))
    text = "<!-- figure:decode-bound latency.json roofline.json 128 autoglm --><!-- /figure -->"
    assert ">50%<" in render_document(text, tmp_path)
    table = render_document("<!-- figures:latency latency.json -->\n<!-- /figures -->\n", tmp_path)
    assert "The engine ran with int8 weights, the LM head in float and kv_cache_dtype int8." in table


def profiled_throughput(folder: Path, name: str, communication_s: float | None) -> str:
    forward = {"linear": 4.0, "attention": 2.0, "other": 1.0}
    if communication_s is not None:
        forward["communication"] = communication_s
    profile = {"num_steps": 10, "step_s": 10.0, "forward_parts_s": forward, "overhead_s": 1.0,
               "phases_s": {"sample": 0.5, "schedule": 0.2, "prepare inputs": 0.2, "detokenize & outputs": 0.1}}
    document = {"machine": CPU, "workloads": {"mixed": {"autoglm": {"profile": profile}}}}
    (folder / name).write_text(json.dumps(document))
    return name


@pytest.mark.parametrize(("communication_s", "shown"), [(None, False), (0.0, False), (2.0, True)])
def test_the_step_profile_shows_communication_only_when_ranks_communicated(tmp_path, communication_s, shown):
    name = profiled_throughput(tmp_path, "profile.json", communication_s)
    rendered = render_document(f"<!-- figures:step-profile {name} -->\n<!-- /figures -->", tmp_path)
    assert ("| forward: communication between ranks (all-reduce, gather) | 20.0% |" in rendered) is shown
    assert "| forward: linear layers | 40.0% |" in rendered
