from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.server.live_server import RunningServer, make_chat_model, start_server
from tests.server.model_versions import make_registry


@pytest.fixture(scope="session")
def chat_model(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("tiny-chat-llama"))


@pytest.fixture(scope="session")
def server(chat_model) -> RunningServer:
    """One server shared by the tests that leave it as they found it."""
    running = start_server(chat_model, served_model_name="tiny-llama")
    yield running
    running.stop()


@pytest.fixture(scope="session")
def single_slot_server(chat_model) -> RunningServer:
    """One request runs at a time and one more may wait: queueing made easy to observe."""
    running = start_server(chat_model, max_num_seqs=1, max_waiting_requests=1)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def versions_registry(tmp_path_factory) -> Path:
    """Two versions of one tiny model, registered once; tests change aliases in copies (`registry_dir`)."""
    return make_registry(tmp_path_factory.mktemp("model-versions"))


@pytest.fixture
def registry_dir(versions_registry, tmp_path) -> Path:
    """A registry of its own for one test (the checkpoints are shared; the records are copied)."""
    return Path(shutil.copytree(versions_registry, tmp_path / "registry"))
