"""Images through a running server: a text-only model refuses them naming the part; a vision model answers the
AutoGLM phone agent's requests, and refuses bad images while a normal stream beside them gains a token in every
engine step; Qwen2.5-VL answers a request with an image."""
from __future__ import annotations

import threading

import httpx
import pytest

from autoglm.engine.llm_engine import LLMEngine
from tests.server.live_server import start_server
from tests.server.media.images import data_url, encoded, png_claiming

PHONE_SAMPLING = {"temperature": 0.0, "top_p": 0.85, "frequency_penalty": 0.2}
SYSTEM = "You are a phone agent. Answer with do(action=...) or finish(message=...)."


def screenshot_turn(text: str, screenshot: bytes | None) -> dict:
    parts = [{"type": "text", "text": text}]
    if screenshot is not None:
        parts.insert(0, {"type": "image_url", "image_url": {"url": data_url(screenshot)}})
    return {"role": "user", "content": parts}


def test_a_text_only_model_refuses_an_image_naming_the_part_and_lists_text_alone(server):
    messages = [{"role": "user", "content": "Hi"}, screenshot_turn("Look", encoded())]
    for route, extra in (("/v1/chat/completions", {"max_tokens": 2}), ("/tokenize", {})):
        response = httpx.post(server.url + route, json={"messages": messages, **extra}, timeout=60)
        error = response.json()["error"]
        assert response.status_code == 400 and error["param"] == "messages[1].content[0]"
        assert "this model takes text only, so it cannot read a part of type 'image_url'" in error["message"]
    card = httpx.get(server.url + "/v1/models", timeout=60).json()["data"][0]
    assert card["input_modalities"] == ["text"]


@pytest.mark.timeout(600)
def test_the_phone_agents_requests_and_bad_images_beside_a_stream(glm4v_tiny, monkeypatch):
    steps: list[list[str]] = []
    step = LLMEngine.step

    def counted_step(self: LLMEngine):
        outputs = step(self)
        steps.append([output.request_id for output in outputs])
        return outputs

    monkeypatch.setattr(LLMEngine, "step", counted_step)
    # A phone deployment bounds a screenshot's pixels, as the tiny model's context must be.
    running = start_server(glm4v_tiny, max_context_len=4096, kv_cache_memory="64MiB", max_request_body_bytes="8MiB",
                           mm_processor_kwargs={"max_pixels": 200_000})
    try:
        client = running.openai()
        card = client.models.list().data[0]
        assert card.model_extra["input_modalities"] == ["text", "image"]
        screenshot = encoded(1080, 2400, (240, 240, 240))
        first = [{"role": "system", "content": SYSTEM}, screenshot_turn("Task: open Settings", screenshot)]
        stream = client.chat.completions.create(model=card.id, messages=first, stream=True,
                                                max_tokens=3000, **PHONE_SAMPLING)
        reply = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        history = [first[0], screenshot_turn("Task: open Settings", None), {"role": "assistant", "content": reply},
                   screenshot_turn("** Screen Info **", screenshot)]
        again = client.chat.completions.create(model=card.id, messages=history, max_tokens=8, **PHONE_SAMPLING)
        assert again.choices[0].finish_reason in ("stop", "length")

        bad_inputs = {
            400: [screenshot_turn("corrupt", encoded()[:-40]), screenshot_turn("bomb", png_claiming(100_000, 100_000)),
                  {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]},
                  {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url(encoded())}}] * 11}],
        }
        stream_ids: list[str] = []
        done = threading.Event()

        def normal_stream() -> None:
            for chunk in client.chat.completions.create(model=card.id, messages=[screenshot_turn("Go", encoded())],
                                                        stream=True, max_tokens=64, temperature=0, extra_body={
                                                            "ignore_eos": True}):
                stream_ids.append(chunk.id)
            done.set()

        worker = threading.Thread(target=normal_stream)
        worker.start()
        for status, messages in bad_inputs.items():
            for message in messages:
                response = httpx.post(running.url + "/v1/chat/completions", json={"messages": [message]}, timeout=60)
                assert response.status_code == status and response.json()["error"]["param"].startswith("messages[0]")
        worker.join(300)
        assert done.is_set()
        request_id = stream_ids[0]
        held = [index for index, ids in enumerate(steps) if request_id in ids]
        assert held == list(range(held[0], held[-1] + 1))  # a token in every step from its first to its last
    finally:
        running.stop()


@pytest.mark.timeout(300)
def test_qwen2_5_vl_answers_a_request_with_an_image(qwen2_5_vl_tiny):
    running = start_server(qwen2_5_vl_tiny, max_context_len=1024, kv_cache_memory="16MiB")
    try:
        client = running.openai()
        card = client.models.list().data[0]
        assert card.model_extra["input_modalities"] == ["text", "image"]
        reply = client.chat.completions.create(model=card.id, messages=[screenshot_turn("What is here?", encoded())],
                                               max_tokens=4, temperature=0)
        assert reply.choices[0].finish_reason in ("stop", "length") and reply.usage.prompt_tokens > 6
    finally:
        running.stop()
