"""Marks for tests that need a package a machine may lack.

xgrammar is one of the package's dependencies, but a lent GPU machine runs the project from source
with only the packages it came with: there the tests that compile or apply a grammar are skipped,
saying why, rather than failing on the import.
"""
from __future__ import annotations

import importlib.util

import pytest

needs_xgrammar = pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None,
    reason="xgrammar is not installed: structured output and forced tool calls compile their grammars with it",
)
