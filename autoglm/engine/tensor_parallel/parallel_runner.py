"""Rank 0's runner under tensor parallelism: every plan goes to the workers, then this rank runs it too.

Every rank runs the same :meth:`ModelRunner.execute`, so their collectives pair up; each samples the
same tokens from the same gathered logits (draws depend on seeds only), and rank 0's output is the step's.
"""
from __future__ import annotations

from torch import nn

from autoglm.distributed.parallel_state import set_communication_timer
from autoglm.engine.tensor_parallel.worker_group import WorkerGroup
from autoglm.profiling import COMMUNICATION, PREPARE, StepProfiler
from autoglm.runner.kv_cache import KVPool
from autoglm.runner.model_runner import ModelRunner
from autoglm.runner.pending_output import PendingStepOutput
from autoglm.step_output import StepOutput
from autoglm.step_plan import StepPlan


class GroupRunner:
    """The engine process's own runner beside the workers of its group (tensor-parallel ranks or pipeline
    stages): what the engine reads of the model and the KV pool is its own rank's share."""

    def __init__(self, runner: ModelRunner, workers: WorkerGroup) -> None:
        self.runner = runner
        self.workers = workers

    @property
    def model(self) -> nn.Module:
        """This rank's shard, or this stage's layers."""
        return self.runner.model

    @property
    def kv_pool(self) -> KVPool:
        return self.runner.kv_pool


class TensorParallelRunner(GroupRunner):
    def enable_profiling(self, profiler: StepProfiler) -> None:
        """Also time the sharded layers' collectives, as the forward's communication part."""
        self.runner.enable_profiling(profiler)
        set_communication_timer(lambda: profiler.forward_part(COMMUNICATION))

    def execute(self, plan: StepPlan) -> StepOutput:
        """Raises EngineBrokenError if a worker has died, or dies during the step."""
        return self.launch(plan).result()

    def launch(self, plan: StepPlan) -> PendingStepOutput:
        """Send ``plan`` to the workers and launch it on this rank; every rank keeps its own samples on its
        device, so each fills the next plan's deferred tokens alike. Raises EngineBrokenError as ``execute``."""
        try:
            with self.runner.profiler.phase(PREPARE):
                self.workers.send(plan)
            return self.runner.launch(plan)
        except Exception as error:
            raise self.workers.broken_by(error) from error
