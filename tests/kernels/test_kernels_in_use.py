"""Which path a step takes is the step's own: engines stepping on other threads, and code between steps, keep
theirs."""
from __future__ import annotations

import threading

from autoglm.kernels import cpu_extension
from autoglm.kernels.cpu_extension import cpu_kernels, cpu_kernels_built, cpu_kernels_in_use


class Built:
    module = object()  # stands in for the loaded library
    failed = False


def test_a_step_on_one_thread_leaves_other_threads_and_later_code_on_their_path(monkeypatch):
    monkeypatch.setattr(cpu_extension, "_build", Built())
    monkeypatch.setattr(cpu_extension, "_outside_steps", None)
    assert cpu_kernels_built() and cpu_kernels() is None
    inside, entered, leave = [], threading.Event(), threading.Event()

    def step_on_the_kernels() -> None:
        with cpu_kernels_in_use(True):
            inside.append(cpu_kernels())
            entered.set()
            leave.wait(30)

    other = threading.Thread(target=step_on_the_kernels)
    other.start()
    assert entered.wait(30)
    assert inside == [Built.module] and cpu_kernels() is None  # this thread is between steps
    with cpu_kernels_in_use(False):
        assert cpu_kernels() is None
        with cpu_kernels_in_use(True):
            assert cpu_kernels() is Built.module
        assert cpu_kernels() is None
    leave.set()
    other.join(30)
    monkeypatch.setattr(cpu_extension, "_outside_steps", Built.module)  # waited for: in use between steps
    assert cpu_kernels() is Built.module
    with cpu_kernels_in_use(False):
        assert cpu_kernels() is None
    assert cpu_kernels() is Built.module
