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
    port: int
    folder: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start redis-server on this port (again, after `stop`: empty), answering PING on return."""
        self.process = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save",
                                         "", "--appendonly", "no", "--dir", str(self.folder)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_until_ready(self)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextlib.contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """Start redis-server, answering PING before this yields; stop it on the way out.

    Skips the test where redis-server is not installed (`make test` installs it).
    """
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    server = RedisServer(free_port(), folder)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _wait_until_ready(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process is None or server.process.poll() is not None:
            raise RuntimeError(f"redis-server on port {server.port} exited before answering")
        with contextlib.suppress(redis.ConnectionError):
            if client.ping():
                return
        time.sleep(0.02)
    raise TimeoutError(f"redis-server at {server.url} did not answer PING within {READY_TIMEOUT_S}s")
