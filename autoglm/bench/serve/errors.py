"""The one error ``autoglm bench serve`` reports as a message rather than a traceback."""
from __future__ import annotations

import importlib
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
