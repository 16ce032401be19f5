"""The one error ``autoglm bench serve`` reports as a message rather than a traceback."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from types import ModuleType

BENCH_EXTRA_HINT = "pip install 'open-autoglm[bench]'"


class ServeBenchError(Exception):
    """A setting, file or server answer that stops the benchmark before it measures anything."""


def import_extra(name: str) -> ModuleType:
    """Import an optional dependency of the ``bench`` extra, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise ServeBenchError(f"autoglm bench serve needs {name}: {BENCH_EXTRA_HINT}") from error


def run_reporting_errors(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)``, with a :class:`ServeBenchError` printed as one line and exit status 2."""
    try:
        return run(args)
    except ServeBenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
