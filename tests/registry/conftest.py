"""Two tiny checkpoints with different weights, made once per session, and an empty registry per test."""
from __future__ import annotations

from pathlib import Path

import pytest

from autoglm.registry import DirectoryRegistry
from tests.tiny_models import make_tiny_checkpoint


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("checkpoints")
    return (make_tiny_checkpoint("llama", folder / "seed-1", seed=1),
            make_tiny_checkpoint("llama", folder / "seed-2", seed=2))


@pytest.fixture
def registry(tmp_path: Path) -> DirectoryRegistry:
    return DirectoryRegistry(tmp_path / "registry")
