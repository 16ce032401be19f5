"""``autoglm bench compare-llamacpp`` against a fake ``llama-bench`` that prints what the real one printed.

``llama_bench/qwen05b.TYPE.md`` is, verbatim, the stdout of llama-cpp-python 0.3.36's llama.cpp (commit
0c1e570) for ``llama-bench -m qwen05b.TYPE.gguf -t 1 -p 16 -n 4 -r 2 -o md`` on the qwen2.5-0.5b shape's random
weights as BF16, Q8_0 and Q4_0; ``not-a-gguf.md`` and ``.err`` are its stdout and stderr (exit status 1) for a
file that is not a GGUF. The engine side runs on the embedded tiny model.
"""
from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from autoglm.bench.llamacpp.inputs import CompareLlamaCppError
from autoglm.bench.llamacpp.llama_bench import CPU_BACKEND_FEATURES, cpu_backend_features, parse_llama_bench

OUTPUTS = Path(__file__).parent / "llama_bench"
BROKEN = "not-a-gguf"
# Prints the captured output of the GGUF's type (its name's last part before .gguf) and logs its arguments.
FAKE_LLAMA_BENCH = """#!{python}
import pathlib, sys
outputs, arguments = pathlib.Path({outputs!r}), sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(" ".join(arguments) + "\\n")
model = arguments[arguments.index("-m") + 1]
kind = pathlib.Path(model).name.removesuffix(".gguf").rsplit(".", 1)[-1]
if kind == {broken!r}:
    sys.stdout.write((outputs / "not-a-gguf.md").read_text())
    sys.stderr.write((outputs / "not-a-gguf.err").read_text().replace("/tmp/bad.gguf", model))
    sys.exit(1)
sys.stdout.write((outputs / ("qwen05b." + kind + ".md")).read_text())
"""
SMALL_RUN = ["--n-prompt", "16", "--n-gen", "4", "--repetitions", "2", "--num-threads", "1"]


@pytest.fixture
def llama_cpp(tmp_path) -> tuple[Path, Path]:
    """A bin/ folder holding the fake llama-bench, and the file it logs its arguments to."""
    bin_folder, log = tmp_path / "bin", tmp_path / "llama-bench.log"
    bin_folder.mkdir()
    fake = bin_folder / "llama-bench"
    fake.write_text(FAKE_LLAMA_BENCH.format(python=sys.executable, outputs=str(OUTPUTS), log=str(log),
                                            broken=BROKEN))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return bin_folder, log


def gguf(folder: Path, kind: str) -> Path:
    path = folder / f"m.{kind}.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_llama_bench_markdown_is_read_as_printed():
    run = parse_llama_bench((OUTPUTS / "qwen05b.q8_0.md").read_text(), "m.q8_0.gguf", [])
    assert (run.model_type, run.file_type, run.size, run.params, run.backend, run.threads) == (
        "qwen2 1B Q8_0", "Q8_0", "500.79 MiB", "494.03 M", "CPU", 1)
    assert (run.rate("pp16"), run.tests["pp16"].stddev, run.rate("tg4")) == (98.03, 2.27, 34.76)
    assert (run.build_commit, run.build_number, run.param_count) == ("0c1e570", 1, 494.03e6)
    with pytest.raises(CompareLlamaCppError, match="no tg128 row for m.q8_0.gguf"):
        run.rate("tg128")


@pytest.mark.parametrize(("output", "message"), [
    ("", "no markdown table and build line"),
    ((OUTPUTS / "qwen05b.bf16.md").read_text().replace("t/s", "speed"), "no column t/s"),
    ((OUTPUTS / "qwen05b.bf16.md").read_text().replace("±", "+-"), "not 'MEAN ± STDDEV'"),
])
def test_output_that_is_not_llama_benchs_table_is_refused(output, message):
    with pytest.raises(CompareLlamaCppError, match=message):
        parse_llama_bench(output, "m.gguf", [])


@pytest.mark.cpu_isa
def test_each_precision_runs_llama_bench_and_the_engine_on_the_same_threads(llama_cpp, tmp_path, capsys,
                                                                           one_torch_thread):
    bin_folder, log = llama_cpp
    files = {kind: gguf(tmp_path, kind) for kind in ("bf16", "q8_0", "q4_0")}
    results = tmp_path / "compare.json"
    assert main(["compare-llamacpp", "--llama-cpp-bin", str(bin_folder), "--gguf", f"bfloat16={files['bf16']}",
                 "--gguf", f"int8={files['q8_0']}", "--gguf", f"int4={files['q4_0']}", *SMALL_RUN,
                 "--output-json", str(results)]) == 0
    assert log.read_text().splitlines() == [f"-m {path} -t 1 -p 16 -n 4 -r 2 -o md" for path in files.values()]
    document = json.loads(results.read_text())
    assert document["settings"]["threads"] == 1 and document["settings"]["engine"]["num_threads"] == 1
    assert document["machine"]["cpu_count"] and document["llama_cpp"]["build_commit"] == "0c1e570"
    assert document["llama_cpp"]["cpu_backend_features"] is None  # no libggml-cpu.so beside the fake
    assert list(document["precisions"]) == ["bfloat16", "int8", "int4"]
    expected = {"bfloat16": ("BF16", 22.80, 111.29, "none"), "int8": ("Q8_0", 34.76, 98.03, "w8a8"),
                "int4": ("Q4_0", 52.66, 152.50, "w4a8")}
    for name, (file_type, decode, prompt, quantization) in expected.items():
        sides = document["precisions"][name]
        llama = sides["llama_cpp"]
        assert (llama["file_type"], llama["decode_tokens_per_s"], llama["prompt_tokens_per_s"]) == (
            file_type, decode, prompt)
        assert llama["gguf"] == files[{"BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0"}[file_type]].name
        assert llama["output"] == (OUTPUTS / f"qwen05b.{llama['gguf'].split('.')[1]}.md").read_text()
        engine = sides["engine"]
        assert engine["settings"]["quantization"] == quantization
        assert engine["settings"]["quantize_lm_head"] == (name != "bfloat16")
        assert len(engine["decode"]["ttft_s"]) == len(engine["prompt"]["ttft_s"]) == 2  # after one warm-up
        assert engine["decode"]["output_len"] == 5 and engine["prompt"]["input_len"] == 16
        assert engine["prompt_tokens_per_s"] == pytest.approx(16 / engine["prompt"]["mean_ttft_s"])
        assert sides["ratios"] == pytest.approx({"decode": engine["decode_tokens_per_s"] / decode,
                                                 "prompt": engine["prompt_tokens_per_s"] / prompt})
    assert "head" not in document["precisions"]["bfloat16"]["engine"]["weights"]
    assert document["precisions"]["int4"]["engine"]["weights"].endswith("int4 head")
    out = capsys.readouterr().out
    assert "batch-1 decode (tg4), tok/s" in out and "prompt processing (pp16), tok/s" in out
    assert "52.7 (Q4_0)" in out
    # The captured outputs are of the qwen2.5-0.5b shape, the engine's model the tiny default.
    assert "warning: m.q8_0.gguf holds 494.03 M parameters and the checkpoint 5.58 M: not the same weights" in out
    figures = render_document(f"<!-- figures:compare-llamacpp {results.name} -->\n<!-- /figures -->", tmp_path)
    assert "| int8 | " in figures and " | 98.0 (Q8_0) | " in figures


def test_a_gguf_of_another_type_than_its_precision_is_refused(llama_cpp, tmp_path, capsys):
    bin_folder, _ = llama_cpp
    status = main(["compare-llamacpp", "--llama-cpp-bin", str(bin_folder),
                   "--gguf", f"int8={gguf(tmp_path, 'q4_0')}", *SMALL_RUN])
    assert status == 2
    assert capsys.readouterr().err.strip().endswith("llama.cpp reads it as Q4_0; int8 compares with a Q8_0 file")


def test_llama_bench_failing_stops_the_command_with_what_it_said(llama_cpp, tmp_path, capsys):
    bin_folder, _ = llama_cpp
    broken = gguf(tmp_path, BROKEN)
    assert main(["compare-llamacpp", "--llama-cpp-bin", str(bin_folder), "--gguf", f"bfloat16={broken}",
                 *SMALL_RUN]) == 2
    error = capsys.readouterr().err.strip()
    assert "exited with status 1" in error and error.endswith(f"llama_bench: error: failed to load model '{broken}'")


@pytest.mark.parametrize(("arguments", "message"), [
    (["--llama-cpp-bin", "{tmp}/nowhere", "--gguf", "bfloat16={gguf}"],
     "--llama-cpp-bin {tmp}/nowhere: no such folder; give the bin/ folder of a llama.cpp build"),
    (["--llama-cpp-bin", "{tmp}", "--gguf", "bfloat16={gguf}"],
     "--llama-cpp-bin {tmp}: holds no executable llama-bench; build it"),
    (["--llama-cpp-bin", "{bin}", "--gguf", "bfloat16={tmp}/missing.gguf"],
     "--gguf bfloat16={tmp}/missing.gguf: no such file {tmp}/missing.gguf"),
    (["--llama-cpp-bin", "{bin}", "--gguf", "fp8={gguf}"],
     "--gguf fp8={gguf}: unknown precision 'fp8'; allowed: bfloat16, int8, int4"),
    (["--llama-cpp-bin", "{bin}", "--gguf", "{gguf}"], "--gguf {gguf}: expected PRECISION=FILE"),
    (["--llama-cpp-bin", "{bin}", "--gguf", "int8={gguf}", "--gguf", "int8={gguf}"],
     "--gguf int8={gguf}: int8 is already compared with {gguf}"),
    (["--llama-cpp-bin", "{bin}"], "no --gguf given; give one per precision to compare"),
])
def test_bad_inputs_exit_2_with_one_line_naming_them(llama_cpp, tmp_path, capsys, arguments, message):
    bin_folder, log = llama_cpp
    names = {"tmp": tmp_path, "bin": bin_folder, "gguf": gguf(tmp_path, "bf16")}
    assert main(["compare-llamacpp", *(word.format(**names) for word in arguments)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"error: {message.format(**names)}")
    assert not log.exists()  # nothing ran


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc) to build a stand-in CPU backend")
def test_the_cpu_backends_instruction_sets_are_read_from_its_library(tmp_path):
    """A stand-in libggml-cpu.so in ../lib, built with AVX2 and AVX512-VNNI but not AVX512-BF16."""
    present = {"avx2", "avx512_vnni"}
    source = tmp_path / "ggml_cpu.c"
    source.write_text("".join(f"int ggml_cpu_has_{name}(void) {{ return {int(name in present)}; }}\n"
                              for name in CPU_BACKEND_FEATURES))
    (tmp_path / "lib").mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "lib" / "libggml-cpu.so"), str(source)],
                   check=True)
    features = cpu_backend_features(tmp_path / "bin")
    assert features == {name: name in present for name in CPU_BACKEND_FEATURES}
    assert cpu_backend_features(tmp_path) is None  # nothing beside it, nor in its ../lib
