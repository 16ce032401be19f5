"""``autoglm serve`` whose engine holds its steps, once a first token is out, until a gate file appears.

Usage: ``python -m tests.server.gated_serve GATE_FILE serve --model ...``. A test that must act
while a request is surely in flight (e.g. signal a drain and see new requests refused) reads the
first streamed token, acts, then creates GATE_FILE to let the request run to its end.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from autoglm.cli.main import main
from autoglm.engine.llm_engine import LLMEngine
from autoglm.outputs import RequestOutput

POLL_INTERVAL_S = 0.01


def hold_steps_until(gate: Path) -> None:
    """Patch LLMEngine.step: every step after the first that produced an output waits for `gate`."""
    step = LLMEngine.step
    token_out = False

    def gated_step(self: LLMEngine) -> list[RequestOutput]:
        nonlocal token_out
        while token_out and not gate.exists():
            time.sleep(POLL_INTERVAL_S)
        outputs = step(self)
        token_out = token_out or bool(outputs)
        return outputs

    LLMEngine.step = gated_step


if __name__ == "__main__":
    hold_steps_until(Path(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
