"""Fixtures of the tensor-parallel tests."""
from __future__ import annotations

import pytest
import torch

from autoglm.engine import torch_threads


@pytest.fixture
def restored_threads(monkeypatch):
    """Torch's thread count, which rank 0 sets to its share of the cores, restored after the test."""
    monkeypatch.setattr(torch_threads, "_set_by_an_engine", False)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
