from __future__ import annotations

import pytest

from autoglm import platforms
from autoglm.kernels.cpu_extension import wait_for_cpu_kernels

BF16_MATRIX_FLAGS = ("avx512_bf16", "amx_bf16")
BUILD_WAIT_S = 600  # a bound to catch a hang; a first build takes about a minute on 2 idle cores


@pytest.fixture
def cpu_without_bf16_units(monkeypatch):
    """The engine treats this CPU as one without bfloat16 matrix units (whether or not it has them)."""
    monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, ",".join(BF16_MATRIX_FLAGS))
    platforms._cpu_flags.cache_clear()
    yield
    monkeypatch.undo()
    platforms._cpu_flags.cache_clear()


@pytest.fixture(scope="session")
def cpu_kernels():
    """The real kernels, built once per torch version in the user's cache (or found there); on an
    AVX-512 CPU a failed build is a failure."""
    built = wait_for_cpu_kernels(BUILD_WAIT_S)
    assert built is not None, "the CPU kernels did not build; see the warning logged"
    return built
