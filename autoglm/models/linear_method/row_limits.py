"""Up to how many rows a compiled linear kernel runs before PyTorch's matmul takes over.

By default every step takes the kernel, whatever its rows (:class:`EveryRow`): the kernel computes each
row alone, in one order of sums whatever else is in the step, so a request's greedy output does not
depend on the batch it runs in. PyTorch's matmul rounds in another order, so a limit below that makes a
row's last bits depend on how many rows share its step; it is the faster choice for long prompts.

Few rows are bound by the bytes of weight read, where the kernels win; many rows are bound by
arithmetic, where PyTorch's matmul (oneDNN, with AMX where the CPU has it) wins. Where the two
cross depends on the CPU, the thread count and the layer's shape, so it is measured: once per
weight shape, when the engine switches to the kernels (``cpu_kernel.measure_row_limits``, which
says so; a fraction of a second each), and kept in a file beside the kernel builds so later starts
on the machine read it.
``cpu_kernel_max_rows`` picks the limit: ``all`` (the default), ``auto`` (measured) or a number.
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from autoglm.kernels.cpu_extension import CPU_KERNELS
from autoglm.kernels.kernel_spec import kernel_cache_root
from autoglm.kernels.linear_kernels import CpuLinearKernel
from autoglm.platforms import cpu_model, disabled_cpu_flags

logger = logging.getLogger(__name__)

CANDIDATE_ROWS = (1, 2, 4, 8, 16, 32, 64)
ROUNDS = 5  # best of: the least disturbed reading of each side
MIN_ROUND_S = 0.002  # calls per round enough that the clock's resolution does not matter
LIMITS_FILE = "linear-row-limits.json"
ALL_ROWS, MEASURED = "all", "auto"  # the named values of ``cpu_kernel_max_rows``


class RowLimit(ABC):
    @abstractmethod
    def max_rows(self, kernel: CpuLinearKernel, kernel_weight: torch.Tensor, weight: torch.Tensor) -> int:
        """Steps of at most this many rows take ``kernel`` (reading ``kernel_weight``) rather than PyTorch
        (reading ``weight``)."""

    @abstractmethod
    def describe(self) -> str:
        """The rows this limit sends to the kernel, in words."""


class EveryRow(RowLimit):
    """Every step takes the kernel: each row's bits are those it gets alone, whatever the batch."""

    def max_rows(self, kernel: CpuLinearKernel, kernel_weight: torch.Tensor, weight: torch.Tensor) -> int:
        return sys.maxsize

    def describe(self) -> str:
        return "steps of any rows (each row computed as it is alone)"


class FixedRowLimit(RowLimit):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def max_rows(self, kernel: CpuLinearKernel, kernel_weight: torch.Tensor, weight: torch.Tensor) -> int:
        return self.rows

    def describe(self) -> str:
        return f"steps of at most {self.rows} rows, PyTorch beyond"


class MeasuredRowLimit(RowLimit):
    """Measured per weight shape, and at least ``min_rows`` (speculative decoding: a verification's rows take
    the path its decode steps take, so that they compute the same bits); 0 (PyTorch) while the kernels are
    not in use, since nothing can be measured."""

    def __init__(self, cache_file: Path | None = None, min_rows: int = 0) -> None:
        self.cache_file = cache_file or kernel_cache_root() / LIMITS_FILE
        self.min_rows = min_rows
        self._limits: dict[str, int] = {}
        self._lock = threading.Lock()

    def known(self, kernel: CpuLinearKernel, weight: torch.Tensor) -> bool:
        """Whether the limit for ``weight`` is known without measuring: measured already, or kept in the file."""
        key = self._key(kernel, weight)
        return key in self._limits or self._stored(self._machine_key(), key) is not None

    def max_rows(self, kernel: CpuLinearKernel, kernel_weight: torch.Tensor, weight: torch.Tensor) -> int:
        key = self._key(kernel, weight)
        rows = self._limits.get(key)
        if rows is not None:
            return rows
        if not kernel.loaded():
            return 0
        with self._lock:
            if key not in self._limits:
                machine = self._machine_key()
                stored = self._stored(machine, key)
                measured = stored if stored is not None else \
                    self._measure_and_store(machine, key, kernel, kernel_weight, weight)
                self._limits[key] = max(measured, self.min_rows)
        return self._limits[key]

    def describe(self) -> str:
        floor = f", at least {self.min_rows}" if self.min_rows else ""
        return f"steps of few rows (how few measured per weight shape{floor}), PyTorch beyond"

    @staticmethod
    def _key(kernel: CpuLinearKernel, weight: torch.Tensor) -> str:
        return f"{kernel.name} {weight.shape[0]}x{weight.shape[1]}"

    def _machine_key(self) -> str:
        """What a measurement holds for: this CPU (as the engine sees it), this thread count, this library build."""
        hidden = ",".join(sorted(disabled_cpu_flags())) or "-"
        return f"{cpu_model()} | hidden {hidden} | {torch.get_num_threads()} threads | {CPU_KERNELS.key()}"

    def _read_file(self) -> dict[str, dict[str, int]]:
        try:
            return json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            return {}

    def _stored(self, machine: str, key: str) -> int | None:
        value = self._read_file().get(machine, {}).get(key)
        return value if isinstance(value, int) else None

    def _measure_and_store(self, machine: str, key: str, kernel: CpuLinearKernel, kernel_weight: torch.Tensor,
                           weight: torch.Tensor) -> int:
        started = time.perf_counter()
        rows = measure_row_limit(kernel, kernel_weight, weight)
        logger.info("%s beats PyTorch's matmul up to %d rows for a %s weight (measured in %.2f s, kept in %s)",
                    kernel.name, rows, key.split()[-1], time.perf_counter() - started, self.cache_file)
        document = self._read_file()
        document.setdefault(machine, {})[key] = rows
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.cache_file.parent, delete=False, suffix=".tmp") as file:
                json.dump(document, file, indent=1)
            os.replace(file.name, self.cache_file)
        except OSError as error:
            logger.warning("could not keep the measured row limit in %s: %s", self.cache_file, error)
        return rows


def row_limit_for(setting: int | str, min_measured_rows: int = 0) -> RowLimit:
    """The limit ``cpu_kernel_max_rows`` names: ``all``, ``auto`` (measured, at least ``min_measured_rows``)
    or a number of rows."""
    if setting == ALL_ROWS:
        return EveryRow()
    if setting == MEASURED:
        return MeasuredRowLimit(min_rows=min_measured_rows)
    return FixedRowLimit(int(setting))


def interleaved_best_seconds(first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
    """Seconds per call of each, the best of :data:`ROUNDS` rounds taken in turn, so that a busy spell on a
    shared machine slows both sides rather than one; each round lasts about :data:`MIN_ROUND_S`."""
    runs = (first, second)
    calls = []
    for run in runs:
        run()  # warm-up
        started = time.perf_counter()
        run()
        calls.append(max(1, math.ceil(MIN_ROUND_S / max(time.perf_counter() - started, 1e-9))))
    best = [math.inf, math.inf]
    for _ in range(ROUNDS):
        for side, run in enumerate(runs):
            started = time.perf_counter()
            for _ in range(calls[side]):
                run()
            best[side] = min(best[side], (time.perf_counter() - started) / calls[side])
    return best[0], best[1]


def measure_row_limit(kernel: CpuLinearKernel, kernel_weight: torch.Tensor, weight: torch.Tensor,
                      timer: Callable[[Callable[[], object], Callable[[], object]], tuple[float, float]]
                      = interleaved_best_seconds) -> int:
    """The largest candidate row count up to which the kernel was at least as fast as PyTorch at every
    candidate; 0 if PyTorch already wins at one row."""
    limit = 0
    generator = torch.Generator().manual_seed(0)
    for rows in CANDIDATE_ROWS:
        x = torch.randn(rows, weight.shape[1], generator=generator).to(kernel.activation_dtype)
        kernel_s, torch_s = timer(lambda: kernel(x, kernel_weight), lambda: F.linear(x, weight))
        if kernel_s > torch_s:
            break
        limit = rows
    return limit
