"""Marks for tests that need a package a machine may lack.

xgrammar is one of the package's dependencies, but a lent GPU machine runs the project from source
with only the packages it came with: there the tests that compile or apply a grammar are skipped,
saying why, rather than failing on the import.

The third-party clients (langchain-openai, instructor, ...) come with the `clients` extra, which
`make test` installs; where one is missing, its tests are skipped, naming the package and the extra.
"""
from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

needs_xgrammar = pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None,
    reason="xgrammar is not installed: structured output and forced tool calls compile their grammars with it",
)


def import_client(module: str, package: str) -> ModuleType:
    """Import a third-party client's module, or skip the tests that need it, saying how to install it."""
    return pytest.importorskip(module, reason=f"{package} is not installed: the client tests need the clients "
                                              f"extra (pip install -e '.[clients]', as make test does)")
