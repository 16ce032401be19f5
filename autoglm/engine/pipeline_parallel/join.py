"""Joining the ranks of a pipeline-parallel engine: every rank its stage, its stage's tensor-parallel group, and
the channel its plans come by.

Every rank creates every stage's tensor-parallel group, in stage order (torch.distributed asks each group of all
ranks), and keeps its own. Hidden states travel on the default group (gloo on the CPU, NCCL on CUDA); plans on a
gloo group, on the CPU where they are built.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from autoglm.distributed.parallel_state import init_tensor_parallel
from autoglm.distributed.pipeline_state import destroy_pipeline_stage, init_pipeline_stage
from autoglm.engine.pipeline_parallel.layout import RankLayout
from autoglm.engine.pipeline_parallel.stage_plan_channel import StagePlanChannel
from autoglm.engine.tensor_parallel.plan_channel import PlanChannel
from autoglm.engine.tensor_parallel.process_group import NO_TIMEOUT, GroupSettings, join_group, leave_group, rank_device


def join_ranks(settings: GroupSettings, rank: int) -> PlanChannel | StagePlanChannel:
    """Join the engine's group as ``rank``, as a tensor-parallel rank or a pipeline stage's; returns the channel
    of the plans."""
    return join_group(settings, rank) if settings.pipeline_parallel_size == 1 else join_stage(settings, rank)


def leave_ranks() -> None:
    """Undo :func:`join_ranks`."""
    destroy_pipeline_stage()
    leave_group()


def join_stage(settings: GroupSettings, rank: int) -> StagePlanChannel:
    if dist.is_initialized():
        raise RuntimeError("this process already belongs to a torch.distributed group: one parallel engine "
                           "runs per process; close the other engine first")
    layout = RankLayout.of(settings)
    if torch.device(settings.device).type == "cuda":
        torch.cuda.set_device(rank_device(settings, rank))
    dist.init_process_group(settings.backend, init_method=settings.init_method, rank=rank,
                            world_size=settings.world_size, timeout=NO_TIMEOUT)
    stage = layout.stage_of(rank)
    tp_groups = [dist.new_group(layout.stage_ranks(index), timeout=NO_TIMEOUT) if layout.tp_size > 1 else None
                 for index in range(layout.num_stages)]
    init_tensor_parallel(layout.tp_rank_of(rank), layout.tp_size, tp_groups[stage],
                         expert_parallel=settings.expert_parallel)
    init_pipeline_stage(stage, layout.num_stages, *layout.neighbours(rank))
    plans = dist.new_group(backend="gloo", timeout=NO_TIMEOUT) if settings.backend != "gloo" else dist.group.WORLD
    workers = [other for other in range(layout.world_size) if other != layout.engine_rank]
    return StagePlanChannel(plans, layout.engine_rank, workers)
