"""How benchmark results are shown: an aligned text table, and the machine they ran on."""
from __future__ import annotations

import ipaddress
import json
import os
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import torch
import transformers

from autoglm import platforms

# Instruction sets that decide how fast a CPU runs a half-precision model: AVX-512 (with VNNI)
# computes float32 fast, and only the bfloat16 ones multiply bfloat16 matrices in hardware.
RECORDED_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16")
ACCELERATOR_KINDS = ("cuda", "xpu")


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``: how results name a dtype."""
    return str(dtype).removeprefix("torch.")


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Strict JSON (no Infinity or NaN), so any language's parser reads it; folders made as needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    print(f"wrote {path}")


def print_and_write(summary: Iterable[str], document: dict[str, Any], output_json: Path | None) -> None:
    """A benchmark's last step: its summary on the terminal, and the whole document where ``--output-json`` asks."""
    for line in summary:
        print(line)
    if output_json is not None:
        write_json(output_json, document)


def accelerator_names() -> list[str]:
    """Name of every CUDA/ROCm or XPU device PyTorch sees, e.g. ``NVIDIA H200``; empty on a CPU-only machine."""
    names = []
    for kind in ACCELERATOR_KINDS:
        backend = getattr(torch, kind, None)
        if backend is not None and backend.is_available():
            names += [backend.get_device_name(index) for index in range(backend.device_count())]
    return names


def machine_info() -> dict[str, Any]:
    """What a reader needs to compare results across machines: the CPU's own flags, and those a run hid."""
    reported = platforms.reported_cpu_flags()
    return {
        "cpu_model": platforms.cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_flags": {flag: flag in reported for flag in RECORDED_CPU_FLAGS} if reported is not None else None,
        # The path the run took, where AUTOGLM_CPU_DISABLE_FLAGS hid some of the flags above.
        "cpu_flags_disabled": sorted(platforms.disabled_cpu_flags()) or None,
        "accelerators": accelerator_names(),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "python_version": platform.python_version(),
    }


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 1) -> str:
    """Columns padded to their widest cell: the first ``text_columns`` left-aligned, numbers right-aligned."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(width) if column < text_columns else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(cells, widths))
        ]
        return "  ".join(padded).rstrip()

    return "\n".join([line(header), line(["-" * width for width in widths]), *map(line, rows)])


def is_local_server(base_url: str) -> bool:
    """Whether the server runs on the machine the benchmark runs on, which then names the server's machine."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
