"""A real redis-server for the tests, on a random port, keeping nothing on disk."""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.server.live_server import free_port

READY_TIMEOUT_S = 10.0


@dataclass
class RedisServer:
    url: str
    process: subprocess.Popen

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextlib.contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """Start redis-server, answering PING before this yields; stop it on the way out.

    Skips the test where redis-server is not installed (`make test` installs it).
    """
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(f"redis://127.0.0.1:{port}", process)
    try:
        _wait_until_ready(server)
        yield server
    finally:
        server.stop()


def _wait_until_ready(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {server.process.returncode} before answering")
        with contextlib.suppress(redis.ConnectionError):
            if client.ping():
                return
        time.sleep(0.02)
    raise TimeoutError(f"redis-server at {server.url} did not answer PING within {READY_TIMEOUT_S}s")
