"""One live server for every client's tests: a tiny random Qwen2 model whose chat template teaches
Qwen's <tool_call> format, so clients may leave tool_choice to the model as well as force a call."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.clients.replies import MODEL
from tests.server.live_server import RunningServer, start_server
from tests.server.tool_calls.templates import QWEN_TEMPLATE
from tests.tiny_models import make_tiny_checkpoint

# Room for an agent's second turn: its instructions, the forced call and the tool's result, byte by byte
# in the tiny tokenizer.
CONTEXT_LEN = 1024


@pytest.fixture(scope="package")
def qwen_model(tmp_path_factory):
    folder = make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("tiny-qwen-clients"),
                                  max_position_embeddings=CONTEXT_LEN)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = QWEN_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="package")
def client_server(qwen_model) -> RunningServer:
    running = start_server(qwen_model, served_model_name=MODEL, dtype="float32", max_context_len=CONTEXT_LEN,
                           kv_cache_memory="8MiB")
    yield running
    running.stop()
