"""Host values reach a CUDA device through pinned memory (a non-blocking copy from pageable memory may
wait for the stream), and anywhere else as they are."""
from __future__ import annotations

import pytest
import torch

from autoglm.device_transfer import staged_for, to_device


def test_values_arrive_with_their_dtype():
    moved = to_device([1, 2, 3], torch.device("cpu"), torch.int32)
    assert moved.dtype == torch.int32 and moved.tolist() == [1, 2, 3]


def test_a_cpu_copy_is_not_pinned():
    host = torch.arange(4)
    assert staged_for(host, torch.device("cpu")) is host


def test_a_cuda_copy_is_staged_in_pinned_memory(monkeypatch: pytest.MonkeyPatch):
    pinned: list[torch.Tensor] = []

    def pin_memory(tensor: torch.Tensor) -> torch.Tensor:  # the real one needs a CUDA driver
        pinned.append(tensor)
        return tensor.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    host = torch.arange(4)
    staged = staged_for(host, torch.device("cuda"))
    assert pinned == [host] and staged is not host and staged.tolist() == [0, 1, 2, 3]
