"""When an engine starts using the compiled CPU kernels: at a step boundary where no request runs.

The kernels round differently from PyTorch, so a request switched part-way would have an output that
depends on when their build ended. Once the library has loaded, the engine admits no new request; those
begun on PyTorch finish on it (a preempted one is taken back); at the first step boundary with none left,
this and every later step run on the kernels (on every tensor-parallel rank: the plans say so), and the
requests that waited are admitted. An engine that waited for the build before its first step (the
offline ``LLM``) switches before any request begins.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from autoglm.kernels.cpu_extension import cpu_kernels_built

logger = logging.getLogger(__name__)


@dataclass
class KernelSwitch:
    """``built``: whether the library has loaded in this process. ``finishing``: while switching, the
    requests begun on PyTorch that must end before it (None when not switching)."""

    built: Callable[[], bool]
    in_use: bool = False
    finishing: set[str] | None = None

    @classmethod
    def for_device(cls, device: torch.device) -> KernelSwitch:
        """In use from the start where the library was loaded before the engine; never off the CPU."""
        if device.type != "cpu":
            return cls(built=lambda: False)
        return cls(built=cpu_kernels_built, in_use=cpu_kernels_built())

    @property
    def pending(self) -> bool:
        """Built and not yet in use: the engine is switching, or will at its next step."""
        return not self.in_use and self.built()

    def admits(self, request_id: str) -> bool:
        """Whether the scheduler may admit a sequence of this request now (not while switching, unless
        the request began before)."""
        return self.finishing is None or request_id in self.finishing

    def at_step_boundary(self, begun: set[str]) -> bool:
        """Decide, before a step is scheduled with no step in flight, whether the kernels are in use from
        this step; ``begun``: the unfinished requests that have run a step. True the moment it switches."""
        if not self.pending:
            return False
        if self.finishing is None and begun:
            logger.info("the CPU kernels are built: admitting no new request until the %d running on plain "
                        "PyTorch have finished, then switching to them", len(begun))
        self.finishing = set(begun)  # a request run alone to find a failure is admitted meanwhile: it joins
        if self.finishing:
            return False
        self.finishing = None
        self.in_use = True
        logger.info("switched to the CPU kernels at a step with no request running; every request from now on "
                    "runs on them")
        return True
