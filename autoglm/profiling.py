"""Where an engine step's time goes: wall time per phase, and the forward pass split by layer kind.

Profiling is off by default: the engine holds :data:`NO_PROFILER`, whose phases are empty
context managers, so the hot path pays one attribute lookup per phase. ``bench --profile``
swaps in a :class:`StepProfiler`, which also hooks the model's attention and linear modules;
under tensor parallelism the ranks' collectives are timed as the forward's communication part,
carved out of the layer they run in.
On accelerators every boundary synchronises the device, so each phase owns the kernels it
launched (and the run is slower than an unprofiled one).
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from autoglm.platforms import synchronize

SCHEDULE, PREPARE, FORWARD, SAMPLE, OUTPUTS = "schedule", "prepare inputs", "forward", "sample", "detokenize & outputs"
STEP_PHASES = (SCHEDULE, PREPARE, FORWARD, SAMPLE, OUTPUTS)
ATTENTION, LINEAR, COMMUNICATION, OTHER = "attention", "linear", "communication", "other"
FORWARD_PARTS = (ATTENTION, LINEAR, COMMUNICATION, OTHER)
STEP = "step"


class NullProfiler:
    """Measures nothing; what the engine holds unless asked to profile."""

    def step(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def forward_part(self, name: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def reset(self) -> None:
        pass

    def result(self) -> None:
        """No profile: nothing was measured."""
        return None


NO_PROFILER = NullProfiler()


@dataclass(frozen=True)
class StepProfile:
    """Totals over the profiled steps, in seconds."""

    num_steps: int
    step_s: float
    phases_s: dict[str, float]  # each of STEP_PHASES
    forward_parts_s: dict[str, float]  # each of FORWARD_PARTS; they sum to the forward phase
    linear_paths: dict[str, dict[str, int]] = field(default_factory=dict)  # projection: {path: calls}

    @property
    def overhead_s(self) -> float:
        """Everything but the forward pass: the engine's own cost per step, mostly Python."""
        return self.step_s - self.phases_s[FORWARD]

    def to_dict(self) -> dict[str, object]:
        return {
            "num_steps": self.num_steps,
            "step_s": self.step_s,
            "overhead_s": self.overhead_s,
            "overhead_fraction": self.overhead_s / self.step_s if self.step_s else 0.0,
            "phases_s": self.phases_s,
            "forward_parts_s": self.forward_parts_s,
            "linear_paths": self.linear_paths,
        }


class StepProfiler:
    """Accumulates wall time of steps, their phases, and attention/linear time inside the forward."""

    def __init__(self, device: torch.device, clock: Callable[[], float] = time.perf_counter) -> None:
        self._device = device
        self._clock = clock
        self.num_steps = 0
        self.totals_s: dict[str, float] = defaultdict(float)  # STEP, each phase, each forward part
        self._part_started: dict[object, tuple[float, float]] = {}  # by module or part: start, communication then
        self.linear_paths: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    @contextlib.contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        synchronize(self._device)
        start = self._clock()
        try:
            yield
        finally:
            synchronize(self._device)
            self.totals_s[name] += self._clock() - start

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        try:
            with self._timed(STEP):
                yield
        finally:
            self.num_steps += 1

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self._timed(name)

    @contextlib.contextmanager
    def forward_part(self, name: str) -> Iterator[None]:
        """Time a part of the forward pass, less the communication that ran inside it."""
        self._start_part(name)
        try:
            yield
        finally:
            self._end_part(name, name)

    def attach(self, model: nn.Module, kinds: dict[type, str]) -> None:
        """Time every module of a listed type as that forward part (``{Attention: ATTENTION, ...}``),
        for the rest of the model's life. Parts must not nest, or time would count twice."""
        for module in model.modules():
            part = next((name for kind, name in kinds.items() if isinstance(module, kind)), None)
            if part is not None:
                module.register_forward_pre_hook(lambda module, args: self._start_part(module))
                module.register_forward_hook(lambda module, args, output, part=part: self._end_part(module, part))

    def count_linear_paths(self, model: nn.Module) -> None:
        """Count, per projection (``qkv_proj``, ``down_proj``, ``lm_head``, ...), which path its linear method
        took on each call: the kernel per instruction set, or PyTorch's matmul."""
        for name, module in model.named_modules():
            if hasattr(module, "linear_method"):
                module.register_forward_pre_hook(self._path_counter(name.rsplit(".", 1)[-1]))

    def _path_counter(self, projection: str):
        def hook(module: nn.Module, args: tuple) -> None:
            self.linear_paths[projection][module.linear_method.path(module, args[0])] += 1

        return hook

    def _start_part(self, key: object) -> None:
        synchronize(self._device)
        self._part_started[key] = (self._clock(), self.totals_s[COMMUNICATION])

    def _end_part(self, key: object, part: str) -> None:
        synchronize(self._device)
        started, communicated_before = self._part_started.pop(key)
        communicated = self.totals_s[COMMUNICATION] - communicated_before
        self.totals_s[part] += self._clock() - started - communicated

    def result(self) -> StepProfile:
        phases = {name: self.totals_s.get(name, 0.0) for name in STEP_PHASES}
        parts = {name: self.totals_s.get(name, 0.0) for name in (ATTENTION, LINEAR, COMMUNICATION)}
        parts[OTHER] = max(0.0, phases[FORWARD] - sum(parts.values()))
        paths = {projection: dict(calls) for projection, calls in self.linear_paths.items()}
        return StepProfile(self.num_steps, self.totals_s.get(STEP, 0.0), phases, parts, paths)

    def reset(self) -> None:
        self.num_steps = 0
        self.totals_s.clear()
        self.linear_paths.clear()
