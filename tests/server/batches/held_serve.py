"""``autoglm serve`` whose engine stops stepping for good once a number of requests have finished, so that a
batch is surely mid-way (some lines done, the rest held) when the test kills the process.

Usage: ``python -m tests.server.batches.held_serve FINISHED serve --model ...``.
"""
from __future__ import annotations

import sys
from functools import partial

from autoglm.cli.main import main
from autoglm.engine.llm_engine import LLMEngine
from autoglm.outputs import RequestOutput
from tests.server.batches.engine_gate import EngineGate


def hold_after(finished: int) -> None:
    gate = EngineGate(finished)
    step = LLMEngine.step

    def held_step(engine: LLMEngine) -> list[RequestOutput]:
        return gate.wrap(partial(step, engine))()

    LLMEngine.step = held_step


if __name__ == "__main__":
    hold_after(int(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
