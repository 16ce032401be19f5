"""Fixtures of the pipeline-parallel tests: those of the tensor-parallel ones."""
from __future__ import annotations

from tests.engine.tensor_parallel.conftest import restored_threads

__all__ = ["restored_threads"]
