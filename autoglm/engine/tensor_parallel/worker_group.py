"""The engine's side of a tensor- or pipeline-parallel engine: it starts the worker processes, hands them
each plan, notices the moment one dies, and stops them.

A dead worker breaks the engine for good (the ranks can no longer run a step together): every later
step raises :class:`EngineBrokenError`, and the listeners hear of it at once, even while the engine
is idle, so a server can stop serving and exit.
"""
from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from autoglm.config import EngineConfig
from autoglm.distributed.parallel_state import set_communication_timer
from autoglm.engine.errors import EngineBrokenError
from autoglm.engine.pipeline_parallel.join import join_ranks, leave_ranks
from autoglm.engine.pipeline_parallel.layout import describe_rank, engine_rank
from autoglm.engine.pipeline_parallel.stage_plan_channel import StagePlanChannel
from autoglm.engine.tensor_parallel.plan_channel import PlanChannel
from autoglm.engine.tensor_parallel.process_group import GroupSettings
from autoglm.engine.tensor_parallel.worker import run_worker
from autoglm.step_plan import StepPlan

logger = logging.getLogger(__name__)

# How long a stopped worker may take to leave before it is killed.
STOP_GRACE_S = 10.0
# The slowest a stopping worker is expected to write its host KV tier down to disk (kv_disk_path).
SLOWEST_DISK_BYTES_PER_S = 100 * 2**20
# How long a failed step waits for the worker behind it to exit, to name it.
EXIT_NOTICE_S = 1.0
# How often a start looks for a worker that died before joining.
JOIN_POLL_S = 0.2

BrokenListener = Callable[[EngineBrokenError], None]

# The open group this process is rank 0 of: torch.distributed holds one group per process.
_member: WorkerGroup | None = None


def group_in_use() -> bool:
    """Whether a tensor-parallel engine of this process holds the group (a new one would close it)."""
    return _member is not None


class WorkerGroup:
    """The worker processes of every rank but this process's: rank 0 under tensor parallelism alone, the last
    stage's first rank under pipeline parallelism (see ``pipeline_parallel.layout``)."""

    def __init__(self, settings: GroupSettings, processes: list[BaseProcess], lifelines: list[Connection],
                 ranks: list[int]) -> None:
        self.settings = settings
        self._processes = processes
        self._ranks = ranks  # each process's rank
        self._lifelines = lifelines  # this process's ends of the workers' lifeline pipes
        self._channel: PlanChannel | StagePlanChannel | None = None
        self._broken: str | None = None  # why, once broken
        self._listeners: list[BrokenListener] = []
        self._lock = threading.Lock()
        self._closing = False
        self._ready = False  # every worker has its runner and waits for plans
        self._stop_grace_s = STOP_GRACE_S
        self._wake_watcher, self._watcher_woken = multiprocessing.Pipe()
        self._watcher = threading.Thread(target=self._watch, name="autoglm-tp-watch", daemon=True)

    @classmethod
    def start(cls, config: EngineConfig, settings: GroupSettings) -> WorkerGroup:
        """Spawn the workers and join the group with them; returns once every rank has joined. An engine
        already running in this process is closed first: one tensor-parallel engine runs per process,
        so a new one replaces the one before it (``llm = LLM(...)`` in a loop), which cannot step again."""
        global _member
        if _member is not None:
            logger.info("a new tensor-parallel engine replaces the one before it in this process; that one is closed")
            _member.close(replaced=True)
        # A fork server that imported the worker's modules once starts each later engine's workers in a moment,
        # where a spawned interpreter would import torch again every time.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["autoglm.engine.tensor_parallel.worker"])
        processes, lifelines = [], []
        ranks = [rank for rank in range(settings.world_size) if rank != engine_rank(settings)]
        for rank in ranks:
            worker_end, engine_end = context.Pipe(duplex=False)
            process = context.Process(target=run_worker, args=(config, settings, rank, worker_end),
                                      name=f"autoglm-tp-rank{rank}", daemon=True)
            process.start()
            worker_end.close()
            processes.append(process)
            lifelines.append(engine_end)
        group = cls(settings, processes, lifelines, ranks)
        try:
            group._join()
        except BaseException:
            group.close()
            raise
        group._watcher.start()
        _member = group
        logger.info("tensor parallelism: %d ranks joined over %s (worker pids %s)", settings.world_size,
                    settings.backend, ", ".join(str(process.pid) for process in processes))
        return group

    def _join(self) -> None:
        """Join as rank 0 on a thread, so that a worker dying before it joins fails the start instead of
        leaving it waiting for good."""
        joined: list[PlanChannel | StagePlanChannel | BaseException] = []

        def join() -> None:
            try:
                joined.append(join_ranks(self.settings, engine_rank(self.settings)))
            except BaseException as error:  # handed to the starting thread
                joined.append(error)

        joiner = threading.Thread(target=join, name="autoglm-tp-join", daemon=True)
        joiner.start()
        while joiner.is_alive():
            joiner.join(JOIN_POLL_S)
            if joiner.is_alive() and (dead := self._dead_worker()) is not None:
                raise EngineBrokenError(f"could not start the engine's workers: {dead}")
        if isinstance(joined[0], BaseException):
            raise joined[0]
        self._channel = joined[0]

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes if process.pid is not None]

    def add_broken_listener(self, listener: BrokenListener) -> None:
        """Call ``listener`` once when the group breaks, or now if it has (from the thread that notices: keep it
        short)."""
        with self._lock:
            self._listeners.append(listener)
            broken = self._broken
        if broken is not None:
            listener(EngineBrokenError(broken))

    def share(self, value: int) -> None:
        """Hand the workers a value they wait for while starting: the number of KV blocks, then (with
        kv_offload_bytes) the host KV tier's slots, then (with kv_disk_path) what names the engine's staged
        block files and the weights' checksum."""
        assert self._channel is not None
        try:
            self._channel.share(value)
        except RuntimeError as error:  # a worker failed to start
            raise self.broken_by(error) from error
        self._ready = True

    def allow_for_stop_writes(self, num_bytes: int) -> None:
        """Give each worker, once told to stop, the time to write ``num_bytes`` (its host KV tier) down to disk
        before it is ended."""
        self._stop_grace_s = STOP_GRACE_S + num_bytes / SLOWEST_DISK_BYTES_PER_S

    def send(self, plan: StepPlan) -> None:
        if self._broken is not None:
            raise EngineBrokenError(self._broken)
        assert self._channel is not None
        self._channel.send(plan)

    def broken_by(self, error: BaseException) -> EngineBrokenError:
        """The error to raise after ``error`` interrupted a step: the group is broken from now on."""
        dead = self._dead_worker(wait_s=EXIT_NOTICE_S)
        self._break(dead or f"a step failed part-way across the ranks ({type(error).__name__}: {error})")
        assert self._broken is not None
        return EngineBrokenError(self._broken)

    def close(self, replaced: bool = False) -> None:
        """Stop every worker (those that will not stop are killed) and leave the group, if it joined one;
        idempotent. Later steps raise EngineBrokenError; ``replaced``: a newer engine took the process's
        group, which the listeners hear of as a break."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            healthy = self._broken is None
            listeners = list(self._listeners) if replaced and healthy else []
            if healthy:
                self._broken = ("closed: a newer tensor-parallel engine in this process replaced it" if replaced
                                else "closed") + "; the engine cannot step again"
        self._wake_watcher.send(None)
        if self._ready and healthy and self._dead_worker() is None:
            try:
                self._channel.send_stop()
            except RuntimeError as error:  # a worker died this moment; it is killed below anyway
                logger.warning("stopping the tensor-parallel workers: %s", error)
        for process in self._processes:
            process.join(self._stop_grace_s)
        for lifeline in self._lifelines:
            lifeline.close()  # a worker still running (stuck in a collective) ends itself now
        for process in self._processes:
            process.join(STOP_GRACE_S)
            if process.is_alive():
                process.kill()
                process.join()
        set_communication_timer(None)
        if self._channel is not None:  # a start that failed before joining leaves another engine's group alone
            leave_ranks()
        global _member
        if _member is self:
            _member = None
        for listener in listeners:
            listener(EngineBrokenError(self._broken))

    def _watch(self) -> None:
        """Wait for a worker to exit, or for close to say the exits are expected."""
        wait([self._watcher_woken, *(process.sentinel for process in self._processes)])
        with self._lock:
            if self._closing:
                return
        dead = self._dead_worker()
        if dead is not None:
            self._break(dead)

    def _dead_worker(self, wait_s: float = 0.0) -> str | None:
        """Which worker has exited and how, after waiting up to ``wait_s`` for one to; None if all run."""
        exiting = wait([process.sentinel for process in self._processes], wait_s)
        for rank, process in zip(self._ranks, self._processes):
            if process.sentinel in exiting:
                process.join(EXIT_NOTICE_S)  # its status, once the system has it
                return f"{describe_rank(self.settings, rank)} (pid {process.pid}) exited with status {process.exitcode}"
        return None

    def _break(self, reason: str) -> None:
        with self._lock:
            if self._broken is not None:
                return
            self._broken = f"{reason}; the engine cannot step again and must be restarted"
            listeners = list(self._listeners)
        logger.error("%s", self._broken)
        for listener in listeners:
            listener(EngineBrokenError(self._broken))
