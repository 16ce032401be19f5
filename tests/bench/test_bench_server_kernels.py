"""A server benchmark measures the engine as it serves once its CPU kernels are built, not plain PyTorch."""
from __future__ import annotations

import httpx
import pytest

from autoglm.bench.lib.server import kernels_building


@pytest.mark.parametrize(("body", "building"), [
    (b"", None),  # another revision's server, whose /health has no body
    (b'{"cpu_kernels": "ready"}', None),
    (b'{"cpu_kernels": "unavailable: no ninja on PATH"}', None),
    (b'{"cpu_kernels": "building (about 70 s, started 12 s ago)"}', "building (about 70 s, started 12 s ago)"),
])
def test_a_health_answer_says_whether_the_kernels_still_build(body, building):
    assert kernels_building(httpx.Response(200, content=body)) == building
