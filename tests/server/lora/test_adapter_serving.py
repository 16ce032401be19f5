"""Requests naming an adapter as their model, through every API that generates: the official openai client,
chat and completions, Anthropic's messages; the response cache keeps each adapter's answers apart."""
from __future__ import annotations

import httpx
import pytest

from tests.server.live_server import start_server
from tests.server.lora.adapters import make_adapter

BASE = "base"
ADAPTERS = ("alpha", "beta")
MESSAGES = [{"role": "user", "content": "Hello world"}]


@pytest.fixture(scope="module")
def served(chat_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("adapters")
    modules = {name: str(make_adapter(chat_model, folder / name, seed)) for seed, name in enumerate(ADAPTERS, 1)}
    running = start_server(chat_model, served_model_name=BASE, enable_lora=True, max_loras=2, lora_modules=modules,
                           response_cache="memory")
    yield running
    running.stop()


def _cached_chat(url: str, model: str) -> tuple[str, str]:
    response = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "model": model, "messages": MESSAGES, "max_tokens": 6, "temperature": 0})
    response.raise_for_status()
    return response.json()["choices"][0]["message"]["content"], response.headers["x-autoglm-cache"]


def test_the_openai_client_generates_with_an_adapter_whole_and_streamed(served):
    client = served.openai()
    texts = {}
    for model in (BASE, *ADAPTERS):
        completion = client.completions.create(model=model, prompt="Hello world", max_tokens=6, temperature=0)
        assert completion.model == model
        texts[model] = completion.choices[0].text
        streamed = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=6, temperature=0,
                                                  stream=True)
        assert {chunk.model for chunk in streamed} == {model}
    assert len(set(texts.values())) == 3  # each adapter writes its own tokens


def test_v1_models_lists_each_adapter_with_its_base_and_folder(served):
    cards = {card.id: card for card in served.openai().models.list()}
    assert set(cards) == {BASE, *ADAPTERS}
    for name in ADAPTERS:
        extra = cards[name].model_extra
        assert extra["parent"] == BASE and extra["root"].endswith(f"/{name}")


def test_anthropic_messages_run_with_the_adapter_named(served):
    answer = httpx.post(served.url + "/v1/messages", timeout=60, json={
        "model": "alpha", "max_tokens": 6, "messages": MESSAGES, "temperature": 0})
    assert answer.status_code == 200 and answer.json()["model"] == "alpha"


def test_the_response_cache_never_gives_one_models_answer_for_another(served):
    first = {model: _cached_chat(served.url, model) for model in (BASE, *ADAPTERS)}
    assert {outcome for _, outcome in first.values()} == {"miss"}
    assert len({text for text, _ in first.values()}) == 3
    for model, (text, _) in first.items():
        assert _cached_chat(served.url, model) == (text, "hit")
