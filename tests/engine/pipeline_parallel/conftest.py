"""Fixtures of the pipeline-parallel tests."""
from __future__ import annotations

from tests.engine.tensor_parallel.conftest import restored_threads  # noqa: F401  (the same fixture)
