"""Requests naming an adapter as their model, through every API that generates: the official openai client,
chat and completions, Anthropic's messages, the Responses API; the response cache keeps each adapter's answers
apart."""
from __future__ import annotations

import httpx
import pytest

from tests.server.live_server import start_server
from tests.lora.adapters import ADAPTER_SPECS, make_adapter

SPEC = ADAPTER_SPECS["everything"]  # rank 16 on attention and MLP, rsLoRA
BASE = "base"
ADAPTERS = ("alpha", "beta")
RETRAINED = ("delta-v1", "delta-v2")  # two trainings of one adapter, served in turn under one name
MESSAGES = [{"role": "user", "content": "Hello world"}]


@pytest.fixture(scope="module")
def served(chat_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("adapters")
    modules = {name: str(make_adapter(chat_model, folder / name, SPEC, seed)) for seed, name in enumerate(ADAPTERS, 1)}
    for seed, retrained in enumerate(RETRAINED, start=3):
        make_adapter(chat_model, folder / retrained, SPEC, seed)
    running = start_server(chat_model, served_model_name=BASE, enable_lora=True, max_loras=2, max_cpu_loras=2,
                           lora_modules=modules, allowed_lora_path=str(folder), response_cache="memory")
    yield running
    running.stop()


def _cached_chat(url: str, model: str) -> tuple[str, str]:
    response = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "model": model, "messages": [{"role": "user", "content": "To be, or not to be"}], "max_tokens": 6,
        "temperature": 0})
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


def test_anthropic_messages_and_the_responses_api_run_with_the_adapter_named(served):
    answer = httpx.post(served.url + "/v1/messages", timeout=60, json={
        "model": "alpha", "max_tokens": 6, "messages": MESSAGES, "temperature": 0})
    assert answer.status_code == 200 and answer.json()["model"] == "alpha"
    response = served.openai().responses.create(model="beta", input="Hello world", max_output_tokens=6, store=False)
    assert response.model == "beta" and response.usage.output_tokens == 6  # max_output_tokens reached


def test_the_response_cache_never_gives_one_models_answer_for_another(served):
    first = {model: _cached_chat(served.url, model) for model in (BASE, *ADAPTERS)}
    assert {outcome for _, outcome in first.values()} == {"miss"}
    assert len({text for text, _ in first.values()}) == 3
    for model, (text, _) in first.items():
        assert _cached_chat(served.url, model) == (text, "hit")


def test_an_adapter_loaded_again_with_other_weights_under_its_name_misses_the_cache(served):
    """With max_cpu_loras=2, loading it evicts alpha or beta from the engine: they still serve, installed again."""
    texts = []
    for folder in RETRAINED:
        load = httpx.post(served.url + "/v1/load_lora_adapter", json={"lora_name": "delta", "lora_path": folder})
        assert load.status_code == 200
        text, outcome = _cached_chat(served.url, "delta")
        assert outcome == "miss"
        texts.append(text)
        assert httpx.post(served.url + "/v1/unload_lora_adapter", json={"lora_name": "delta"}).status_code == 200
    assert texts[0] != texts[1]
    for model in ADAPTERS:
        again = httpx.post(served.url + "/v1/completions", timeout=60,
                           json={"model": model, "prompt": "A small model", "max_tokens": 3})
        assert again.status_code == 200 and again.json()["model"] == model
    assert len(served.state.engine.list_loras()) <= 2
