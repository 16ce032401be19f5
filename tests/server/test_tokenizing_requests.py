"""Tokenizing stalls nobody: a long tokenization holds up neither other connections nor running
streams, text no context could hold is refused untokenized, and many requests may tokenize at once."""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.live_server import long_completion, slow_down_steps, start_server
from tests.tiny_models import TOKENIZER_TEXT

pytestmark = pytest.mark.timeout(90)

# Texts holding this word are held in the tokenizer until the test releases them, wherever that happens.
SLOW_WORD = "sloth"
HELD_TOKENIZING_BOUND_S = 60.0  # a held tokenization waits for its release; this only catches a hang
CHUNKS_WHILE_HELD = 5  # chunks a running stream must send while another request's tokenization is held


def tokenizer_class(server) -> type:
    return type(server.state.engine.engine.tokenizer)


def hold_tokenizing(server, monkeypatch, release: threading.Event) -> threading.Event:
    """Hold every copy of the server's tokenizer over a text with SLOW_WORD until ``release`` is set;
    the event returned is set once such a tokenization has begun."""
    cls = tokenizer_class(server)
    encode, started = cls.encode, threading.Event()

    def held_encode(self, text, *args, **kwargs):
        if isinstance(text, str) and SLOW_WORD in text:
            started.set()
            release.wait(HELD_TOKENIZING_BOUND_S)
        return encode(self, text, *args, **kwargs)

    monkeypatch.setattr(cls, "encode", held_encode)
    return started


def record_tokenized_lengths(server, monkeypatch) -> list[int]:
    """The length of every text the server's tokenizers are asked to encode from now on."""
    cls = tokenizer_class(server)
    encode, lengths = cls.encode, []

    def recording_encode(self, text, *args, **kwargs):
        lengths.append(len(text))
        return encode(self, text, *args, **kwargs)

    monkeypatch.setattr(cls, "encode", recording_encode)
    return lengths


def test_a_prompt_no_context_could_hold_is_refused_untokenized_and_the_streams_go_on(server, monkeypatch):
    slow_down_steps(server, monkeypatch, step_s=0.03)
    tokenized_lengths = record_tokenized_lengths(server, monkeypatch)
    huge = "the quick brown fox " * 95_000  # 1.9 million characters: a body under 2 MB
    max_chars = server.state.engine.engine.inputs.prompt_char_limit.max_chars
    with httpx.stream("POST", server.url + "/v1/completions", json=long_completion(stream=True),
                      timeout=60) as stream:
        chunks = (line for line in stream.iter_lines() if line.startswith("data: "))
        next(chunks)
        refused = httpx.post(server.url + "/v1/completions", json={"prompt": huge, "max_tokens": 2}, timeout=30)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert f"{len(huge)} characters" in error["message"] and f"at most {max_chars} characters" in error["message"]
        assert max(tokenized_lengths, default=0) < len(huge)
        assert sum(1 for _ in chunks) > CHUNKS_WHILE_HELD  # the stream went on to its end


def test_a_slow_tokenization_does_not_stall_the_running_streams(server, monkeypatch):
    release = threading.Event()
    started = hold_tokenizing(server, monkeypatch, release)
    with ThreadPoolExecutor(1) as sender, httpx.stream("POST", server.url + "/v1/completions",
                                                       json=long_completion(stream=True), timeout=60) as stream:
        chunks = (line for line in stream.iter_lines() if line.startswith("data: "))
        next(chunks)
        answer = sender.submit(httpx.post, server.url + "/v1/completions",
                               json={"prompt": f"{SLOW_WORD} and fox", "max_tokens": 2}, timeout=60)
        try:
            assert started.wait(HELD_TOKENIZING_BOUND_S)
            for _ in range(CHUNKS_WHILE_HELD):  # the stream goes on while that tokenization is held
                next(chunks)
            assert not answer.done()
        finally:
            release.set()
        assert answer.result(timeout=60).status_code == 200


@pytest.mark.parametrize("body", [{"prompt": f"a {SLOW_WORD}"},
                                  {"messages": [{"role": "user", "content": f"a {SLOW_WORD}"}]}])
def test_health_answers_while_tokenize_runs(server, monkeypatch, body):
    release = threading.Event()
    started = hold_tokenizing(server, monkeypatch, release)
    with ThreadPoolExecutor(1) as sender:
        tokenized = sender.submit(httpx.post, server.url + "/tokenize", json=body, timeout=30)
        try:
            assert started.wait(HELD_TOKENIZING_BOUND_S)
            assert httpx.get(server.url + "/health", timeout=HELD_TOKENIZING_BOUND_S).status_code == 200
            assert not tokenized.done()
        finally:
            release.set()
        assert tokenized.result().status_code == 200


def test_tokenize_refuses_text_no_context_could_hold(server, monkeypatch):
    tokenized_lengths = record_tokenized_lengths(server, monkeypatch)
    max_chars = server.state.engine.engine.inputs.prompt_char_limit.max_chars
    response = httpx.post(server.url + "/tokenize", json={"prompt": "x" * (max_chars + 1)}, timeout=30)
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    assert tokenized_lengths == []


def test_many_requests_tokenizing_at_once_all_get_their_tokens(server):
    texts = [f"{TOKENIZER_TEXT[:100 + 7 * i]} {i}" for i in range(16)]
    expected = [httpx.post(server.url + "/tokenize", json={"prompt": text}).json()["tokens"] for text in texts]

    async def tokenize_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            requests = []
            for _ in range(4):
                for text in texts:
                    requests.append(client.post("/tokenize", json={"prompt": text}))
                    requests.append(client.post("/detokenize", json={"tokens": expected[texts.index(text)]}))
                    requests.append(client.post("/v1/completions", json={"prompt": text, "max_tokens": 1}))
            return await asyncio.gather(*requests)

    responses = asyncio.run(asyncio.wait_for(tokenize_all(), timeout=80))
    assert [response.status_code for response in responses] == [200] * len(responses)
    for index, response in enumerate(responses):
        text_index = index // 3 % len(texts)
        if index % 3 == 0:
            assert response.json()["tokens"] == expected[text_index]
        elif index % 3 == 1:
            assert response.json()["prompt"].endswith(f" {text_index}")
        else:
            assert response.json()["usage"]["prompt_tokens"] == len(expected[text_index])


def test_the_server_runs_as_many_tokenizer_workers_as_set(chat_model):
    running = start_server(chat_model, tokenizer_workers=3)
    try:
        assert len(running.state.tokenizers.worker_tokenizers) == 3
    finally:
        running.stop()
