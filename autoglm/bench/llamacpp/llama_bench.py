"""llama.cpp's side: ``llama-bench`` run on one GGUF, its markdown table read back, and the CPU features its
build compiled in.

llama-bench prints (``-o md``) one row per test, ``pp512`` (prompt processing) and ``tg128`` (generation, one
token a step), each ``mean ± stddev`` tokens per second over its repetitions, then ``build: COMMIT (NUMBER)``.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoglm.bench.llamacpp.inputs import CompareLlamaCppError

_BUILD = re.compile(r"^build: (?P<commit>\S+) \((?P<number>\d+)\)$", re.MULTILINE)
_RATE = re.compile(r"^(?P<mean>\d+(?:\.\d+)?) ± (?P<stddev>\d+(?:\.\d+)?)$")
_COLUMNS = ("model", "size", "params", "backend", "threads", "test", "t/s")
_PARAMS_UNITS = {"M": 1e6, "B": 1e9}  # llama-bench writes "494.03 M" or "1.24 B"
# ggml's CPU backend says through ggml_cpu_has_<feature>() which instruction sets it was compiled for.
CPU_BACKEND_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512", "avx512_vbmi", "avx512_vnni", "avx512_bf16",
                        "amx_int8")
_CPU_BACKEND = "libggml-cpu.so"
# Run apart from this process: the library brings its own OpenMP runtime, which has no business beside torch's.
_FEATURE_PROBE = ("import ctypes, sys; library = ctypes.CDLL(sys.argv[1]); "
                  "print(' '.join(name for name in sys.argv[2:] if getattr(library, 'ggml_cpu_has_' + name)()))")


@dataclass(frozen=True)
class LlamaBenchTest:
    tokens_per_s: float  # the mean over llama-bench's repetitions
    stddev: float


@dataclass(frozen=True)
class LlamaBenchRun:
    """One llama-bench run on one GGUF, as it printed it."""

    gguf: str
    model_type: str  # "qwen2 1B Q8_0": architecture, llama.cpp's size class, the file's type
    size: str
    params: str
    backend: str
    threads: int
    tests: dict[str, LlamaBenchTest]  # by llama-bench's name: pp512, tg128
    build_commit: str
    build_number: int
    command: list[str]
    output: str  # stdout verbatim

    @property
    def file_type(self) -> str:
        return self.model_type.rsplit(" ", 1)[-1]

    @property
    def param_count(self) -> float:
        """Parameters as printed, to two decimals of millions or billions."""
        number, unit = self.params.split()
        return float(number) * _PARAMS_UNITS[unit]

    def rate(self, test: str) -> float:
        if test not in self.tests:
            raise CompareLlamaCppError(f"llama-bench printed no {test} row for {self.gguf} (rows: "
                                       f"{', '.join(self.tests) or 'none'})")
        return self.tests[test].tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "file_type": self.file_type}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_llama_bench(output: str, gguf: str, command: list[str]) -> LlamaBenchRun:
    """llama-bench's markdown table for one model; what does not read as one is an error naming the line."""
    lines = [line for line in output.splitlines() if line.startswith("|")]
    build = _BUILD.search(output)
    if len(lines) < 3 or build is None:
        raise CompareLlamaCppError(f"llama-bench printed no markdown table and build line for {gguf}:\n{output}")
    header = _cells(lines[0])
    missing = [column for column in _COLUMNS if column not in header]
    if missing:
        raise CompareLlamaCppError(f"llama-bench's table for {gguf} has no column {', '.join(missing)}: {lines[0]}")
    rows = [dict(zip(header, _cells(line))) for line in lines[2:]]
    tests = {}
    for row in rows:
        rate = _RATE.match(row["t/s"])
        if rate is None:
            raise CompareLlamaCppError(f"llama-bench's t/s for {gguf} reads {row['t/s']!r}, not 'MEAN ± STDDEV'")
        tests[row["test"]] = LlamaBenchTest(float(rate["mean"]), float(rate["stddev"]))
    first = rows[0]
    return LlamaBenchRun(gguf=gguf, model_type=first["model"], size=first["size"], params=first["params"],
                         backend=first["backend"], threads=int(first["threads"]), tests=tests,
                         build_commit=build["commit"], build_number=int(build["number"]), command=command,
                         output=output)


def run_llama_bench(executable: Path, gguf: Path, threads: int, n_prompt: int, n_gen: int,
                    repetitions: int) -> LlamaBenchRun:
    command = [str(executable), "-m", str(gguf), "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
               "-r", str(repetitions), "-o", "md"]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        said = finished.stderr.strip().splitlines()[-1:] or ["nothing"]
        raise CompareLlamaCppError(f"{' '.join(command)} exited with status {finished.returncode}: {said[0]}")
    return parse_llama_bench(finished.stdout, gguf.name, command)


def cpu_backend_features(bin_folder: Path) -> dict[str, bool] | None:
    """Which instruction sets the build's CPU backend uses; None where its library is not beside llama-bench
    (nor in ``../lib``) or does not answer."""
    library = next((path for path in (bin_folder / _CPU_BACKEND, bin_folder.parent / "lib" / _CPU_BACKEND)
                    if path.is_file()), None)
    if library is None:
        return None
    probe = subprocess.run([sys.executable, "-c", _FEATURE_PROBE, str(library), *CPU_BACKEND_FEATURES],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return None
    present = set(probe.stdout.split())
    return {feature: feature in present for feature in CPU_BACKEND_FEATURES}
