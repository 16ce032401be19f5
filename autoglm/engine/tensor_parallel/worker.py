"""A worker process: rank 1..N-1 of a tensor-parallel engine, or any rank but the engine's of a pipeline.

It joins the group, loads its shard of the model (under pipeline parallelism, of its stage's layers) and the
KV cache of its heads, then runs every plan the engine sends, exactly as the engine's rank runs it, until the
engine says stop. Its outputs are discarded: the engine's rank's are the step's. It never outlives the
engine's process: a thread waits on a pipe whose other end only that process holds, and ends the worker
when the pipe closes.
"""
from __future__ import annotations

import logging
import os
import threading
from multiprocessing.connection import Connection

from autoglm.config import EngineConfig
from autoglm.engine.rank_model import load_rank_model
from autoglm.engine.pipeline_parallel.join import join_ranks, leave_ranks
from autoglm.engine.tensor_parallel.process_group import GroupSettings, rank_device, rank_threads
from autoglm.engine.torch_threads import claim_num_threads
from autoglm.host_allocator import keep_freed_memory_for_reuse
from autoglm.kernels.cpu_extension import cpu_kernels_in_use
from autoglm.engine.kv_offload.worker_tier import worker_host_tier

logger = logging.getLogger(__name__)

# The status of a worker whose engine process went away without stopping it.
EXIT_ENGINE_GONE = 3


def run_worker(config: EngineConfig, settings: GroupSettings, rank: int, lifeline: Connection) -> None:
    _exit_when_closed(lifeline)
    claim_num_threads(rank_threads(config.device.num_threads, settings))
    device = rank_device(settings, rank)
    if device.type == "cpu":
        keep_freed_memory_for_reuse()
    channel = join_ranks(settings, rank)
    rank_model = load_rank_model(config, device)
    runner = rank_model.runner(config.cache.block_size, channel.share())
    if config.cache.kv_offload_bytes and (num_slots := channel.share()) > 0:  # rank 0 sized the host KV tier
        runner.host_tier = worker_host_tier(config, settings, rank, rank_model, runner.kv_pool, num_slots, channel)
    while (plan := channel.receive()) is not None:
        with cpu_kernels_in_use(plan.use_cpu_kernels):  # rank 0's engine switches; every rank with it
            runner.launch(plan)  # its output is rank 0's to read
    if runner.host_tier is not None:
        runner.host_tier.persist()  # its blocks, for the engines that start after this one
    leave_ranks()


def _exit_when_closed(lifeline: Connection) -> None:
    """End this process as soon as the engine's end of ``lifeline`` closes (nothing is ever sent on it)."""

    def wait() -> None:
        try:
            lifeline.recv()
        except EOFError:
            pass
        logger.warning("tensor-parallel worker %d: the engine's process is gone; exiting", os.getpid())
        os._exit(EXIT_ENGINE_GONE)

    threading.Thread(target=wait, name="autoglm-engine-lifeline", daemon=True).start()
