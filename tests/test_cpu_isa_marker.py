"""The ``cpu_isa`` marker selects the tests ``make test`` runs again as on a CPU without bfloat16 units.

A marker with a typo, or one dropped from the files that carry it, would leave that second pass
running nothing and passing; these checks make it fail instead.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def selected_test_files(*paths: str) -> Counter[str]:
    """How many tests of each file ``-m cpu_isa`` selects among ``paths``."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "cpu_isa", *paths],
        cwd=REPOSITORY, capture_output=True, text=True, check=True).stdout
    return Counter(line.split("::")[0] for line in collected.splitlines() if "::" in line)


def test_the_marker_selects_kernel_and_quantized_path_tests_and_leaves_the_scheduler_out() -> None:
    kernels, quantized, scheduler = ("tests/kernels/test_cpu_attention.py", "tests/models/test_quantization_kernels.py",
                                     "tests/engine/sched/test_scheduler.py")
    files = selected_test_files(kernels, quantized, scheduler)
    assert files[kernels] > 20 and files[quantized] > 20, files
    assert scheduler not in files


def test_the_makefile_runs_the_marked_tests_the_second_time() -> None:
    makefile = (REPOSITORY / "Makefile").read_text()
    assert "-m cpu_isa" in makefile
