from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_torch_thread():
    """Commands that set torch's thread count leave it as they found it for the tests after them."""
    threads = torch.get_num_threads()
    yield 1
    torch.set_num_threads(threads)
