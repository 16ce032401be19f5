"""Joining the ranks of one tensor-parallel engine: backend, rendezvous address, each rank's device.

Every rank runs :func:`join_group` with the same :class:`GroupSettings`; it returns once all
have joined. A worker waits for its next plan for as long as the engine stays idle, so the
collectives carry no timeout that idleness could reach: a rank that dies is noticed by its peers'
sockets closing (gloo raises at once) and by rank 0's watch on the worker processes.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from autoglm.distributed.parallel_state import destroy_tensor_parallel, init_tensor_parallel
from autoglm.engine.tensor_parallel.plan_channel import PlanChannel

# Long enough never to end a wait the engine's own idleness causes.
NO_TIMEOUT = timedelta(days=365)
_DEVICE_BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


@dataclass(frozen=True)
class GroupSettings:
    """What every rank needs to find the others; plain values, handed to each worker as it starts."""

    backend: str  # 'gloo' or 'nccl'
    init_method: str  # tcp://127.0.0.1:PORT
    world_size: int
    device: str  # rank 0's device; rank r takes device index r on an accelerator
    expert_parallel: bool = False  # enable_expert_parallel: the ranks split the experts whole
    pipeline_parallel_size: int = 1  # stages of world_size / pipeline_parallel_size tensor-parallel ranks each


def group_settings(backend: str, device: torch.device, world_size: int,
                   expert_parallel: bool = False) -> GroupSettings:
    """Checked settings for ``world_size`` ranks on ``device``: clear errors for what cannot work."""
    if device.type not in _DEVICE_BACKENDS:
        raise ValueError(f"tensor_parallel_size={world_size} runs on 'cpu' or 'cuda' devices, not {device.type!r}")
    if backend == "auto":
        backend = _DEVICE_BACKENDS[device.type]
    if backend == "nccl" and device.type != "cuda":
        raise ValueError(f"distributed_backend 'nccl' needs CUDA devices, and this engine runs on {device.type!r}; "
                         "use 'gloo' or 'auto'")
    if device.type == "cuda":
        first, count = device.index or 0, torch.cuda.device_count()
        if first + world_size > count:
            raise ValueError(f"tensor_parallel_size={world_size} needs {world_size} CUDA devices from cuda:{first}, "
                             f"but this machine has {count}")
        device = torch.device("cuda", first)
    return GroupSettings(backend, f"tcp://127.0.0.1:{_free_port()}", world_size, str(device), expert_parallel)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_device(settings: GroupSettings, rank: int) -> torch.device:
    """The CPU for every rank, or one accelerator each, counted from rank 0's."""
    device = torch.device(settings.device)
    if device.type == "cpu":
        return device
    return torch.device(device.type, (device.index or 0) + rank)


def rank_threads(num_threads: int | None, settings: GroupSettings) -> int | None:
    """Each rank's torch threads: as set, or on the CPU an equal share of this process's cores."""
    if num_threads is not None or torch.device(settings.device).type != "cpu":
        return num_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // settings.world_size)


def join_group(settings: GroupSettings, rank: int) -> PlanChannel:
    """Join the engine's group as ``rank`` and make it this process's tensor-parallel group (the sharded layers'
    collectives); the returned channel carries the plans."""
    if dist.is_initialized():
        raise RuntimeError("this process already belongs to a torch.distributed group: one tensor-parallel engine "
                           "runs per process; close the other engine first")
    if torch.device(settings.device).type == "cuda":
        torch.cuda.set_device(rank_device(settings, rank))
    dist.init_process_group(settings.backend, init_method=settings.init_method, rank=rank,
                            world_size=settings.world_size, timeout=NO_TIMEOUT)
    init_tensor_parallel(rank, settings.world_size, expert_parallel=settings.expert_parallel)
    plans = dist.new_group(backend="gloo", timeout=NO_TIMEOUT) if settings.backend != "gloo" else dist.group.WORLD
    return PlanChannel(plans)


def leave_group() -> None:
    """Undo :func:`join_group`, so that this process may run another engine."""
    destroy_tensor_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()
