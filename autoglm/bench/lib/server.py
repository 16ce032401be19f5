"""The server a server benchmark (soak, tenants, swap) measures: one it starts as a subprocess, or one already
running, and its resident memory."""
from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from autoglm.bench.lib.errors import ServeBenchError

STARTUP_TIMEOUT_S = 300.0
KERNEL_BUILD_TIMEOUT_S = 1800.0  # a first build of the server's CPU kernels on a busy machine; a bound on a hang
STOP_TIMEOUT_S = 60.0


def resident_bytes(pid: int) -> int:
    """VmRSS of a process on this machine, from /proc."""
    status = Path(f"/proc/{pid}/status")
    try:
        lines = status.read_text().splitlines()
    except OSError as error:
        raise ServeBenchError(f"cannot read the server's memory from {status}: {error}") from None
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ServeBenchError(f"{status} has no VmRSS line")


@dataclass
class BenchServer:
    base_url: str
    pid: int | None  # None: a remote server whose memory is not measured
    process: subprocess.Popen | None = None

    def resident_bytes(self) -> int | None:
        return None if self.pid is None else resident_bytes(self.pid)

    def stop(self) -> None:
        """Stop the server this benchmark started (SIGTERM: it drains), nothing else."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(port: int, model: str | None, serve_args: str, log_path: Path,
                 entry_point: Sequence[str] = (sys.executable, "-m", "autoglm"),
                 environment: Mapping[str, str] | None = None) -> BenchServer:
    """``autoglm serve`` on 127.0.0.1:port in a subprocess, its output in log_path; returns once it is ready.

    ``entry_point`` and ``environment`` choose which package serves: this one by default, another
    revision's checkout for ``bench ab``.
    """
    command = [*entry_point, "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--model", model] if model else []
    command += shlex.split(serve_args)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    server = BenchServer(f"http://127.0.0.1:{port}", process.pid, process)
    print(f"started {shlex.join(command)} (pid {process.pid}, log {log_path})", flush=True)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    kernels_since: float | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServeBenchError(f"the server exited with status {process.returncode}; see {log_path}")
        try:
            answer = httpx.get(server.base_url + "/health", timeout=5)
        except httpx.TransportError:
            answer = None
        if answer is not None and answer.status_code == 200:
            building = kernels_building(answer)
            if building is None:
                if kernels_since is not None:
                    print(f"the server's CPU kernels are built ({time.monotonic() - kernels_since:.0f} s)", flush=True)
                return server
            if kernels_since is None:  # measured on plain PyTorch, the figures would not be the engine's
                print(f"waiting for the server's CPU kernels to build: {building}", flush=True)
                kernels_since = time.monotonic()
                deadline = max(deadline, kernels_since + KERNEL_BUILD_TIMEOUT_S)
        time.sleep(0.2)
    server.stop()
    if kernels_since is not None:
        raise ServeBenchError(f"the server's CPU kernels were not built within {KERNEL_BUILD_TIMEOUT_S:g} s; "
                              f"see {log_path}")
    raise ServeBenchError(f"the server was not ready within {STARTUP_TIMEOUT_S:g} s; see {log_path}")


def kernels_building(health: httpx.Response) -> str | None:
    """What a 200 from /health says of CPU kernels still building, or None (built, none, or a server whose
    /health has no body)."""
    try:
        status = health.json().get("cpu_kernels", "")
    except (ValueError, AttributeError):
        return None
    return status if isinstance(status, str) and status.startswith("building") else None
