"""The engine's runner under pipeline parallelism: the last stage, fed by the stages before it.

Launching a step only sends its plan to the other ranks, which start on it at once; reading its output
runs the last stage (it waits for the stream from the stage before, then samples). So while the engine
runs the last stage of one batch, the first stage already runs the next one: the engine keeps up to
one batch per stage launched (see :class:`~autoglm.engine.pipeline_parallel.microbatches.Microbatches`).
"""
from __future__ import annotations

from autoglm.engine.tensor_parallel.parallel_runner import GroupRunner
from autoglm.engine.tensor_parallel.worker_group import WorkerGroup
from autoglm.profiling import PREPARE, StepProfiler
from autoglm.runner.model_runner import ModelRunner
from autoglm.step_output import StepOutput
from autoglm.step_plan import StepPlan


class LastStageOutput:
    """A launched step's output: the last stage runs when it is read, once."""

    def __init__(self, runner: ModelRunner, workers: WorkerGroup, plan: StepPlan) -> None:
        self.runner = runner
        self.workers = workers
        self.plan = plan
        self._output: StepOutput | None = None

    def result(self) -> StepOutput:
        """Raises EngineBrokenError if a stage has died, or dies while this runs."""
        if self._output is None:
            try:
                self._output = self.runner.launch(self.plan).result()
            except Exception as error:
                raise self.workers.broken_by(error) from error
        return self._output


class PipelineRunner(GroupRunner):
    def enable_profiling(self, profiler: StepProfiler) -> None:
        self.runner.enable_profiling(profiler)

    def execute(self, plan: StepPlan) -> StepOutput:
        return self.launch(plan).result()

    def launch(self, plan: StepPlan) -> LastStageOutput:
        """Send ``plan`` to the other ranks; raises EngineBrokenError if a stage has died."""
        try:
            with self.runner.profiler.phase(PREPARE):
                self.workers.send(plan)
        except Exception as error:
            raise self.workers.broken_by(error) from error
        return LastStageOutput(self.runner, self.workers, plan)
