"""One benchmark run of one revision: a fresh Python process that imports that revision's
package, its output shown as it comes and its ``--output-json`` read back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

from autoglm.bench.ab.checkouts import Checkout
from autoglm.bench.ab.errors import ABError

# Every revision has ``main(argv)`` in ``autoglm.cli.main`` (or, before the command line became a
# package, in ``autoglm.cli``); not all have ``python -m autoglm``. The empty entry of ``sys.path``
# (the current folder) is dropped: a checkout in the folder the command was started from would
# shadow the revision on PYTHONPATH.
ENTRY_POINT = ("import sys\n"
               "sys.path[:] = [entry for entry in sys.path if entry]\n"
               "try:\n    from autoglm.cli.main import main\n"
               "except ModuleNotFoundError:\n    from autoglm.cli import main\n"
               "sys.exit(main(sys.argv[1:]))")
SHOWN_ON_FAILURE = 25  # last lines of a failed run's output quoted in the error
BASELINE_FLAG = "--baseline"
NO_BASELINE = ("--baseline", "none")


def entry_point() -> tuple[str, ...]:
    """``autoglm`` with this interpreter, whatever the revision's entry points."""
    return (sys.executable, "-c", ENTRY_POINT)


def bench_command(arguments: list[str]) -> list[str]:
    """``autoglm bench ARGUMENTS`` of whichever revision is first on PYTHONPATH."""
    return [*entry_point(), "bench", *arguments]


def environment(checkout: Checkout) -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH: its package is ``autoglm``."""
    python_path = os.pathsep.join(filter(None, [str(checkout.path), os.environ.get("PYTHONPATH")]))
    variables = {**os.environ, "PYTHONPATH": python_path, "PYTHONUNBUFFERED": "1"}
    if checkout.extensions_dir is not None:
        variables["TORCH_EXTENSIONS_DIR"] = str(checkout.extensions_dir)
    return variables


def engine_only_arguments(checkout: Checkout, benchmark: list[str]) -> list[str]:
    """``benchmark`` plus ``--baseline none`` where the revision's command takes it and it was not
    given: the comparison is of the engine, and transformers would only add time and noise."""
    command = subprocess.run(bench_command([benchmark[0], "--help"]), env=environment(checkout),
                             capture_output=True, text=True)
    if command.returncode != 0:
        raise ABError(f"{checkout.revision.describe()} cannot run `bench {benchmark[0]}`:\n"
                      f"{last_lines(command.stdout + command.stderr)}")
    if BASELINE_FLAG in command.stdout and BASELINE_FLAG not in benchmark:
        return [*benchmark, *NO_BASELINE]
    return benchmark


def run_side(checkout: Checkout, arguments: list[str], output_json: Path, where: str) -> dict[str, Any]:
    """The results the benchmark wrote; its output lines are shown indented as they come.

    ``where`` (e.g. "round 2, A") names the run in the error raised when it fails.
    """
    command = bench_command([*arguments, "--output-json", str(output_json)])
    tail: deque[str] = deque(maxlen=SHOWN_ON_FAILURE)
    process = subprocess.Popen(command, env=environment(checkout), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        for line in process.stdout:
            tail.append(line.rstrip("\n"))
            print(f"    {tail[-1]}", flush=True)
        code = process.wait()
    finally:
        if process.poll() is None:  # Ctrl-C or an error here: the benchmark must not outlive us
            process.kill()
            process.wait()
    if code != 0:
        raise ABError(f"the benchmark failed in {where}, on {checkout.revision.describe()} (exit status {code}); "
                      f"its last lines:\n" + "\n".join(tail))
    if not output_json.is_file():
        raise ABError(f"the benchmark wrote no results in {where}, on {checkout.revision.describe()}")
    return json.loads(output_json.read_text())


def last_lines(text: str) -> str:
    """The end of a run's output, quoted when it failed."""
    return "\n".join(text.splitlines()[-SHOWN_ON_FAILURE:])
