"""Real servers for the tests: the app under uvicorn as `autoglm serve` runs it, on 127.0.0.1, a random free port,
a tiny model."""
from __future__ import annotations

import atexit
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families
from transformers import AutoTokenizer

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.server.app import build_app
from autoglm.server.batches.timing import BatchClock
from autoglm.server.state import ServerState
from autoglm.server.tenants.rate_limits import LimitWindows
from autoglm.server.http.uvicorn_config import uvicorn_config
from tests.tiny_models import make_tiny_checkpoint

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# Small enough to start in a moment, big enough for every test's prompt plus output; usage kept in memory, and
# what the server keeps for tenants in a folder of the test run's own: never in the user's data folder.
TEST_DATA_DIR = tempfile.mkdtemp(prefix="autoglm-test-data-")
atexit.register(shutil.rmtree, TEST_DATA_DIR, ignore_errors=True)
BASE_SETTINGS = {"max_context_len": 256, "kv_cache_memory": "4MiB", "log_stats_interval_s": 0.5,
                 "usage_db": ":memory:", "data_dir": TEST_DATA_DIR}
STARTUP_TIMEOUT_S = 60.0
# A hang guard for a server process's start: a Python and PyTorch start and a model load, minutes on a loaded machine.
PROCESS_START_S = 240.0
# The pytest bound of a test that starts a server process and does a minute's work with it.
PROCESS_TEST_TIMEOUT_S = PROCESS_START_S + 120


def make_chat_model(folder: Path) -> Path:
    """A tiny llama checkpoint whose tokenizer carries a simple chat template."""
    make_tiny_checkpoint("llama", folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port_pair() -> int:
    """A free port whose next one is free too, for a command that takes the port it is given and the one after."""
    while True:
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


@dataclass
class RunningServer:
    url: str
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def state(self) -> ServerState:
        return self.app.state.server

    def openai(self) -> OpenAI:
        return OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0, timeout=60)

    def metrics(self) -> dict[str, float]:
        return scrape_metrics(self.url)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def start_server(model: Path, load_engine: Callable[[], LLMEngine] | None = None, wait_ready: bool = True,
                 limit_windows: LimitWindows = LimitWindows(), batch_clock: BatchClock = BatchClock(),
                 **settings: object) -> RunningServer:
    """Serve `model` from a uvicorn thread; by default, return once /health answers 200."""
    config = AutoGLMConfig(model=str(model), **{**BASE_SETTINGS, **settings}).server_config()
    app = build_app(config, load_engine=load_engine, limit_windows=limit_windows, batch_clock=batch_clock)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server = uvicorn.Server(uvicorn_config(app, config))  # host and port give way to the socket
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    running = RunningServer(url, app, server, thread)
    wait_for_health(url, 200 if wait_ready else 503)
    return running


def wait_for_health(url: str, status: int, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5).status_code == status:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url}/health did not answer {status} within {timeout_s}s")


def scrape_metrics(url: str) -> dict[str, float]:
    """Every sample of /metrics by name and sorted labels, e.g. 'autoglm:x_total{finished_reason=length}'."""
    text = httpx.get(url + "/metrics", timeout=10).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "model_name")
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    """Whether ``condition`` came true; returns as soon as it does, so ``timeout_s`` is a hang guard only
    (a loaded machine makes conditions slow to come, never false)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def sse_payloads(response: httpx.Response) -> list[str]:
    """The data of each server-sent event of a streamed response, read to the end."""
    return [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]


def long_completion(**overrides: object) -> dict[str, object]:
    """A request body that keeps the engine busy for a few seconds."""
    return {"prompt": "Hello world", "max_tokens": 200, "temperature": 0, "ignore_eos": True, **overrides}


def slow_down_steps(server: RunningServer, monkeypatch, step_s: float = 0.02) -> None:
    """Make every engine step take at least `step_s`, so a long request stays in flight for seconds
    however fast the machine is (and the HTTP side must stay responsive meanwhile)."""
    engine = server.state.engine.engine
    step = engine.step

    def slow_step():
        time.sleep(step_s)
        return step()

    monkeypatch.setattr(engine, "step", slow_step)
