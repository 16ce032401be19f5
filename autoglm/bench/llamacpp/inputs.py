"""What ``compare-llamacpp`` is given, checked before anything loads: llama.cpp's ``bin/`` folder and one GGUF
per precision. A wrong one stops the command with one line saying what is wrong and what is allowed."""
from __future__ import annotations

import os
from pathlib import Path

from autoglm.bench.llamacpp.precisions import PRECISIONS

LLAMA_BENCH = "llama-bench"


class CompareLlamaCppError(Exception):
    """An input or a llama.cpp answer that stops the comparison; shown as one line, exit status 2."""


def llama_bench_path(bin_folder: Path) -> Path:
    """``bin_folder/llama-bench``, which must be an executable file."""
    if not bin_folder.is_dir():
        raise CompareLlamaCppError(f"--llama-cpp-bin {bin_folder}: no such folder; give the bin/ folder of a llama.cpp "
                                   f"build, the one that holds {LLAMA_BENCH}")
    executable = bin_folder / LLAMA_BENCH
    if not executable.is_file() or not os.access(executable, os.X_OK):
        raise CompareLlamaCppError(f"--llama-cpp-bin {bin_folder}: holds no executable {LLAMA_BENCH}; build it in "
                                   f"llama.cpp's source folder with cmake --build build --target {LLAMA_BENCH}")
    return executable


def _allowed() -> str:
    return ", ".join(PRECISIONS)


def gguf_files(specs: list[str]) -> dict[str, Path]:
    """``["bfloat16=M.bf16.gguf", "int8=M.q8_0.gguf"]`` as precision -> existing file, in the order given."""
    if not specs:
        raise CompareLlamaCppError(f"no --gguf given; give one per precision to compare, e.g. --gguf "
                                   f"bfloat16=M.bf16.gguf (precisions: {_allowed()})")
    files: dict[str, Path] = {}
    for spec in specs:
        name, separator, path = spec.partition("=")
        if not separator or not path:
            raise CompareLlamaCppError(f"--gguf {spec}: expected PRECISION=FILE, e.g. int8=M.q8_0.gguf "
                                       f"(precisions: {_allowed()})")
        if name not in PRECISIONS:
            raise CompareLlamaCppError(f"--gguf {spec}: unknown precision {name!r}; allowed: {_allowed()}")
        if name in files:
            raise CompareLlamaCppError(f"--gguf {spec}: {name} is already compared with {files[name]}; "
                                       "give one file per precision")
        if not Path(path).is_file():
            raise CompareLlamaCppError(f"--gguf {spec}: no such file {path}")
        files[name] = Path(path)
    return files
