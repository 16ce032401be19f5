"""Run a function on every rank of a small gloo tensor-parallel group, each rank a spawned process.

``run_on_ranks(function, tmp_path, *args)`` starts ``world_size`` processes, joins them into one
``torch.distributed`` group (gloo, a ``file://`` rendezvous in ``tmp_path``), makes each one a
tensor-parallel rank (``parallel_state.init_tensor_parallel``), calls ``function(*args)`` there and
returns what each rank returned, in rank order. ``function`` must be importable (module level) and
return what ``torch.save`` can write. A rank that raises fails the call with its traceback.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from autoglm.distributed.parallel_state import destroy_tensor_parallel, init_tensor_parallel

HANG_LIMIT_S = 300  # only to turn a deadlock into a failure, never a speed check


def run_on_ranks(function: Callable[..., Any], tmp_path: Path, *args: Any, world_size: int = 2) -> list[Any]:
    results = tmp_path / "rank-results"
    results.mkdir(exist_ok=True)
    rendezvous = tmp_path / "rendezvous"
    context = mp.start_processes(_rank_main, args=(world_size, str(rendezvous), str(results), function, args),
                                 nprocs=world_size, join=False, start_method="spawn")
    deadline = time.monotonic() + HANG_LIMIT_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            raise TimeoutError(f"{world_size} ranks running {function.__name__} still had not finished "
                               f"after {HANG_LIMIT_S} s")
    return [torch.load(results / f"{rank}.pt", weights_only=False) for rank in range(world_size)]


def _rank_main(rank: int, world_size: int, rendezvous: str, results: str, function: Callable[..., Any],
               args: tuple[Any, ...]) -> None:
    torch.set_num_threads(1)  # the ranks share the machine's cores
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size)
    try:
        init_tensor_parallel(rank, world_size)
        torch.save(function(*args), Path(results) / f"{rank}.pt")
        # Every rank done before any tears the group down: a rank that left while its peer was still
        # in gloo's last exchange has been seen to abort the peer ("terminate called without an active exception").
        dist.barrier()
    finally:
        destroy_tensor_parallel()
        dist.destroy_process_group()
