"""Commands that answer at once load neither PyTorch nor transformers; a setting the model refuses stops
``serve`` with one line before any server starts."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import uvicorn

from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.server.http.draining_server import DrainingServer
from tests.server.live_server import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
HEAVY_MODULES = ("torch", "transformers")
# Run in a fresh interpreter: each command's status, and which heavy modules the whole run imported.
PROBE = """
import contextlib, io, json, sys
import autoglm
from autoglm.cli.main import main
statuses = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            statuses.append(main(argv))
        except SystemExit as stop:
            statuses.append(stop.code)
print(json.dumps({"statuses": statuses, "heavy": sorted(set(json.loads(sys.argv[2])) & set(sys.modules))}))
"""


def run_probe(commands: list[list[str]]) -> dict[str, list]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(commands), json.dumps(HEAVY_MODULES)],
                          cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout)


def test_version_help_keys_and_offline_models_commands_load_neither_torch_nor_transformers(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("tenants:\n  - id: team\n")
    registry = ["--registry-dir", str(tmp_path / "registry")]
    commands = [
        ["--version"], ["--help"], ["keys", "--help"], ["keys", "create", "--tenant", "team", "--file", str(tenants)],
        ["keys", "list", "--file", str(tenants)], ["models", "--help"],
        ["models", "register", "tiny", str(DEFAULT_MODEL_DIR), *registry], ["models", "list", *registry],
        ["models", "show", "tiny", *registry], ["models", "alias", "tiny", "canary", "1", *registry],
        ["serve", "--help"], ["serve", "--help=all"], ["generate", "--help"], ["bench", "--help"],
        ["bench", "throughput", "--help"], ["quantize", "--help"], ["eval-ppl", "--help"],
    ]
    assert run_probe(commands) == {"statuses": [0] * len(commands), "heavy": []}


def test_an_unknown_flag_or_a_bad_setting_is_refused_without_torch() -> None:
    commands = [["--no-such-flag"], ["serve", "--no-such-flag"], ["serve", "--port", "http"],
                ["serve", "--help=no-such-group"], ["generate", "hi", "--block-size", "0"]]
    assert run_probe(commands) == {"statuses": [2] * len(commands), "heavy": []}


def test_import_autoglm_loads_its_public_names_only_when_used() -> None:
    probe = ("import sys, autoglm\n"
             "before = sorted({'torch', 'transformers'} & set(sys.modules))\n"
             "autoglm.SamplingParams, autoglm.AutoGLMConfig\n"
             "print(before)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True,
                          timeout=120)
    assert done.stdout.strip() == "[]"


@pytest.mark.timeout(180)
def test_serve_refuses_a_model_that_does_not_split_in_one_line_before_any_server_starts() -> None:
    """The embedded model has 8 attention heads: 3 ranks cannot split them."""
    done = subprocess.run([sys.executable, "-m", "autoglm", "serve", "--tensor-parallel-size", "3",
                           "--port", str(free_port())], cwd=REPO_ROOT, capture_output=True, text=True, timeout=150)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "error: tensor_parallel_size 3 does not divide the model's num_attention_heads (8); sizes that do: 1, 2, 4, 8")
    assert "Traceback" not in done.stderr and "Uvicorn" not in done.stderr


async def _no_app(scope: dict, receive: object, send: object) -> None:
    """An ASGI app that is never called: the test only asks the server what it logs."""


def test_a_server_stopped_by_a_failed_load_never_says_it_is_running(caplog: pytest.LogCaptureFixture) -> None:
    config = uvicorn.Config(app=_no_app, port=8123, log_config=None)
    config.load()
    server = DrainingServer(config, state=None)
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        server.stop(1)
        server._log_started_message([])
        assert "running on" not in caplog.text
        server.should_exit = False
        server._log_started_message([])
    assert "Uvicorn running on http://127.0.0.1:8123" in caplog.text


@pytest.mark.timeout(180)
def test_a_setting_the_model_refuses_while_loading_is_one_line_and_stops_the_server() -> None:
    """The server loads the model after it starts (so /health answers meanwhile): a setting only the weights can
    refuse is logged in one line, not as a traceback, and the process ends with the load-failure status."""
    done = subprocess.run([sys.executable, "-m", "autoglm", "serve", "--quantization", "int8",
                           "--quantization-group-size", "7", "--port", str(free_port())],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=150)
    assert done.returncode == 1
    assert "loading the model failed: layer 'model.layers.0.self_attn.qkv_proj': quantization group size 7" \
        in done.stderr
    assert "Traceback" not in done.stderr
