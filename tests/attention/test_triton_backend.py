"""The Triton paged-attention kernel, run in Triton's interpreter on the CPU, agrees with the torch backend."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.attention.triton_attention_cases import CASES

pytest.importorskip("triton")
REPOSITORY = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5  # float32 sums in another order


@pytest.fixture(scope="module")
def interpreted_errors() -> dict[str, float]:
    """Every case in one interpreted process (a hang fails the run rather than stalling it)."""
    environment = {**os.environ, "TRITON_INTERPRET": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "tests.attention.triton_attention_cases"], cwd=REPOSITORY,
                          env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_decode_prefill_and_cached_prefix_rows_match_the_torch_backend(interpreted_errors, case):
    assert interpreted_errors[case] < TOLERANCE
