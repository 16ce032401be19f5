"""The tensor-parallel group this process belongs to, and the collectives the sharded layers call.

One group per process, set once by the distributed runtime on every rank before the model is built.
Uninitialised, this process is the only rank: ``tp_size()`` is 1 and every collective is the
identity, so single-process code pays nothing and never touches ``torch.distributed``.
Imports only torch, so the models, the runner and the engine can all use it.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

CommunicationTimer = Callable[[], contextlib.AbstractContextManager[None]]


@dataclass(frozen=True)
class _TensorParallelGroup:
    rank: int
    world_size: int
    group: dist.ProcessGroup | None  # None: torch.distributed's default group
    expert_parallel: bool  # each rank holds a share of the experts whole, not a slice of every expert


_group: _TensorParallelGroup | None = None
_communication_timer: CommunicationTimer = contextlib.nullcontext


def init_tensor_parallel(rank: int, world_size: int, group: dist.ProcessGroup | None = None,
                         expert_parallel: bool = False) -> None:
    """Make this process rank ``rank`` of ``world_size``; ``group`` None means the default process group,
    which the caller has initialised already (``torch.distributed.init_process_group``). ``expert_parallel``:
    the same ranks also split a mixture-of-experts model's experts between them (see ``models.partition``)."""
    global _group
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"tensor-parallel rank {rank} of {world_size}: "
                         "need world_size >= 1 and 0 <= rank < world_size")
    if world_size > 1 and not dist.is_initialized():
        raise RuntimeError("tensor parallelism of size > 1 needs torch.distributed.init_process_group first")
    _group = _TensorParallelGroup(rank, world_size, group, expert_parallel)


def destroy_tensor_parallel() -> None:
    """Back to a single process (the group itself is the caller's to destroy)."""
    global _group
    _group = None


def tp_rank() -> int:
    """This process's rank in the tensor-parallel group; 0 when not initialised."""
    return 0 if _group is None else _group.rank


def tp_size() -> int:
    """How many ranks the model is split across; 1 when not initialised."""
    return 1 if _group is None else _group.world_size


def expert_parallel() -> bool:
    """Whether the group's ranks each hold a share of the experts whole; False when not initialised."""
    return _group is not None and _group.expert_parallel


def set_communication_timer(timer: CommunicationTimer | None) -> None:
    """Have every collective run inside ``timer()`` (the profiler's communication phase); None stops timing."""
    global _communication_timer
    _communication_timer = timer or contextlib.nullcontext


def all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Sum ``x`` across ranks, in place; returns ``x``."""
    if _group is None or _group.world_size == 1:
        return x
    with _communication_timer():
        dist.all_reduce(x, group=_group.group)
    return x


def all_reduce_max(x: torch.Tensor) -> torch.Tensor:
    """The elementwise maximum of ``x`` across ranks, in place; returns ``x``."""
    if _group is None or _group.world_size == 1:
        return x
    with _communication_timer():
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=_group.group)
    return x


def all_gather_last_dim(x: torch.Tensor) -> torch.Tensor:
    """Every rank's ``x`` concatenated along the last dim, in rank order (each rank holds one slice)."""
    if _group is None or _group.world_size == 1:
        return x
    x = x.contiguous()
    shards = [torch.empty_like(x) for _ in range(_group.world_size)]
    with _communication_timer():
        dist.all_gather(shards, x, group=_group.group)
    return torch.cat(shards, dim=-1)


def broadcast(x: torch.Tensor, src: int = 0) -> torch.Tensor:
    """Overwrite ``x`` on every rank with rank ``src``'s ``x``, in place; returns ``x``."""
    if _group is None or _group.world_size == 1:
        return x
    with _communication_timer():
        dist.broadcast(x, group=_group.group, group_src=src)
    return x
