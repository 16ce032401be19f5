"""The C allocator's thresholds for a CPU engine, and freed memory handed back."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from autoglm import host_allocator

needs_glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt and malloc_trim are glibc's")

# In a fresh process: how much resident memory (MiB) a written and freed 64 MiB tensor leaves,
# then what is left once free memory is released. With glibc's default thresholds the block was
# mapped on its own and is unmapped on free; kept, it waits to be reused by the next step.
RESIDENT_PROBE = """
import os, sys, torch
from autoglm.host_allocator import keep_freed_memory_for_reuse, release_free_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory_for_reuse()
def resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
start = resident_mib()
block = torch.ones(16 << 20)
del block
freed = resident_mib()
release_free_memory()
print(round(freed - start), round(resident_mib() - start))
"""


def resident_after_free_and_release(mode: str) -> tuple[int, int]:
    env = {key: value for key, value in os.environ.items() if key not in host_allocator._ALLOCATOR_VARIABLES}
    result = subprocess.run([sys.executable, "-c", RESIDENT_PROBE, mode], env=env, capture_output=True,
                            text=True, check=True, timeout=120)
    after_free, after_release = map(int, result.stdout.split())
    return after_free, after_release


@needs_glibc
def test_a_freed_large_tensor_stays_for_reuse_until_free_memory_is_released():
    assert resident_after_free_and_release("default")[0] < 16  # unmapped on free
    after_free, after_release = resident_after_free_and_release("keep")
    assert after_free >= 60 and after_release < 16


@needs_glibc
@pytest.mark.parametrize("variable, value", [("MALLOC_MMAP_THRESHOLD_", "131072"),
                                             ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072")])
def test_thresholds_the_environment_sets_are_left_alone(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    assert not host_allocator.keep_freed_memory_for_reuse()


@needs_glibc
def test_free_memory_can_be_released_on_glibc():
    assert host_allocator.release_free_memory()


def test_without_glibc_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(host_allocator, "_MALLOPT", None)
    monkeypatch.setattr(host_allocator, "_MALLOC_TRIM", None)
    assert not host_allocator.keep_freed_memory_for_reuse()
    assert not host_allocator.release_free_memory()
