from __future__ import annotations

import pytest

from tests.server.live_server import RunningServer, make_chat_model, start_server


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
