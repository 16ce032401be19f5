"""Scripted GLM-4.5-format servers for the Responses API's tests: the runner writes given transcripts (thinking,
text, calls in GLM-4.5's format) and keeps the prompt it last read, so that a test says exactly what the model
answers and sees exactly what it was asked. A server starts in a moment: it loads no weights."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.engine.sequence import Sequence
from tests.engine.scripted_engine import TranscriptRunner, scripted_engine
from tests.server.live_server import RunningServer, start_server
from tests.thinking_model import make_glm45_chat_model

MODEL = "glm"
CONTEXT_LEN = 1024
NUM_BLOCKS = 256


class PromptKeepingRunner(TranscriptRunner):
    """A TranscriptRunner that keeps the prompt of the sequence it last wrote a token for."""

    def __init__(self, vocab_size: int, eos_token_id: int) -> None:
        super().__init__(vocab_size, eos_token_id)
        self.last_prompt: list[int] = []

    def next_token_at(self, seq: Sequence, position: int) -> int:
        self.last_prompt = seq.token_ids[:seq.num_prompt_tokens]
        return super().next_token_at(seq, position)


@dataclass
class ScriptedServer:
    server: RunningServer
    runner: PromptKeepingRunner
    tokenizer: PreTrainedTokenizerBase

    def answer(self, transcript: str) -> None:
        """What the model writes, from the next request on."""
        self.runner.scripts = [self.tokenizer.encode(transcript, add_special_tokens=False)]

    def last_prompt(self) -> str:
        return self.tokenizer.decode(self.runner.last_prompt)

    def rendered(self, messages: list[dict], **template_kwargs: object) -> str:
        """The prompt the model's chat template writes for `messages` (and their reply's opening)."""
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  **template_kwargs)


def start_scripted(model: Path, tokenizer: PreTrainedTokenizerBase, runner: PromptKeepingRunner | None = None,
                   **settings: object) -> ScriptedServer:
    """A server of the tiny GLM-4.5 model whose replies `runner` writes, reading thinking with glm45."""
    runner = runner or PromptKeepingRunner(len(tokenizer), tokenizer.eos_token_id)
    server = start_server(model, load_engine=lambda: scripted_engine(NUM_BLOCKS, runner, model,
                                                                     max_context_len=CONTEXT_LEN),
                          served_model_name=MODEL, max_context_len=CONTEXT_LEN, reasoning_parser="glm45", **settings)
    return ScriptedServer(server, runner, tokenizer)


@pytest.fixture(scope="package")
def glm45_model(tmp_path_factory) -> Path:
    return make_glm45_chat_model(tmp_path_factory.mktemp("tiny-glm45-responses"))


@pytest.fixture(scope="package")
def glm45_tokenizer(glm45_model) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(glm45_model)


@pytest.fixture(scope="module")
def scripted(glm45_model, glm45_tokenizer, tmp_path_factory) -> Iterator[ScriptedServer]:
    """One scripted server per module, with a data folder of its own."""
    running = start_scripted(glm45_model, glm45_tokenizer, data_dir=str(tmp_path_factory.mktemp("data")))
    yield running
    running.server.stop()
