"""The one error the server benchmarks (serve, soak, tenants, swap) report as a message rather than a traceback."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from types import ModuleType

BENCH_EXTRA_HINT = "pip install 'open-autoglm[bench]'"


class ServeBenchError(Exception):
    """A setting, file or server answer that stops the benchmark before it measures anything."""


def import_extra(name: str, needed_by: str) -> ModuleType:
    """Import an optional dependency of the ``bench`` extra, or say what needs it and how to install it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise ServeBenchError(f"{needed_by} needs {name}: {BENCH_EXTRA_HINT}") from error


def run_http_bench(command: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)`` once httpx imports, with a :class:`ServeBenchError` printed as one line and exit status 2:
    the handler of every benchmark that talks to a server (serve, soak, tenants, swap), ``command`` its name."""
    try:
        import_extra("httpx", f"autoglm bench {command}")
        return run(args)
    except ServeBenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
