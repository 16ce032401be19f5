"""The engine's switch to the CPU kernels waits for a step boundary where no request begun on PyTorch runs."""
from __future__ import annotations

import torch

from autoglm.engine.kernel_switch import KernelSwitch


class Built:
    def __init__(self) -> None:
        self.done = False

    def __call__(self) -> bool:
        return self.done


def test_nothing_changes_while_the_library_builds():
    switch = KernelSwitch(built=Built())
    assert not switch.at_step_boundary({"a"}) and not switch.in_use and not switch.pending
    assert switch.admits("b")


def test_the_running_requests_finish_first_and_new_ones_wait_for_the_switch():
    built = Built()
    switch = KernelSwitch(built=built)
    built.done = True
    assert switch.pending
    assert not switch.at_step_boundary({"a", "b"})
    assert switch.admits("a") and switch.admits("b") and not switch.admits("new")
    assert not switch.at_step_boundary({"b"})  # a ended; b still runs on PyTorch
    assert not switch.in_use and not switch.admits("new") and not switch.admits("a")
    assert switch.at_step_boundary(set())
    assert switch.in_use and not switch.pending and switch.admits("new")
    assert not switch.at_step_boundary({"new"})  # switched once; nothing more to decide


def test_an_idle_engine_switches_at_its_next_step():
    built = Built()
    switch = KernelSwitch(built=built)
    built.done = True
    assert switch.at_step_boundary(set()) and switch.in_use


def test_an_engine_off_the_cpu_never_switches():
    switch = KernelSwitch.for_device(torch.device("meta"))
    assert not switch.pending and not switch.at_step_boundary(set()) and not switch.in_use


def test_a_request_that_begins_during_the_switch_finishes_before_it():
    built = Built()
    switch = KernelSwitch(built=built)
    built.done = True
    assert not switch.at_step_boundary({"a"})
    assert not switch.at_step_boundary({"a", "alone"})  # run alone to find a failed step's cause
    assert not switch.at_step_boundary({"alone"}) and switch.admits("alone") and not switch.admits("new")
    assert switch.at_step_boundary(set())
