"""GLM-4.1V-Thinking's and AutoGLM's reply format, ``<think>...</think><answer>...</answer>``, served for a request
with a screenshot: as the model writes it without a reasoning parser (what the phone agent reads), and split into
the reasoning and the answer with ``--reasoning-parser glm45``; whole and streamed alike."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.engine.scripted_engine import TranscriptRunner, scripted_engine
from tests.server.live_server import start_server
from tests.server.media.images import data_url, encoded

pytestmark = pytest.mark.timeout(300)

THINKING = "The Settings icon is on the home screen, second row."
ANSWER = '<answer>do(action="Tap", element=[500,100])</answer>'
REPLY = f"<think>{THINKING}</think>{ANSWER}"
CONTEXT = 4096


def phone_request() -> dict:
    screenshot = {"type": "image_url", "image_url": {"url": data_url(encoded(1080, 2400, (240, 240, 240)))}}
    return {"model": "autoglm-phone", "temperature": 0, "max_tokens": 200,
            "messages": [{"role": "user", "content": [screenshot, {"type": "text", "text": "Open Settings"}]}]}


@pytest.mark.parametrize(("reasoning_parser", "reasoning", "content"), [
    (None, "", REPLY),
    ("glm45", THINKING, ANSWER),
])
def test_the_reply_comes_through_as_written_or_split_by_the_parser(glm4v_tiny, reasoning_parser, reasoning, content):
    tokenizer = AutoTokenizer.from_pretrained(glm4v_tiny)
    runner = TranscriptRunner(len(tokenizer), tokenizer.eos_token_id)
    runner.scripts = [tokenizer.encode(REPLY, add_special_tokens=False)]
    parser = {} if reasoning_parser is None else {"reasoning_parser": reasoning_parser}
    running = start_server(glm4v_tiny, load_engine=lambda: scripted_engine(512, runner, glm4v_tiny,
                                                                           max_context_len=CONTEXT),
                           served_model_name="autoglm-phone", max_context_len=CONTEXT,
                           mm_processor_kwargs={"max_pixels": 200_000}, **parser)
    try:
        client = running.openai()
        message = client.chat.completions.create(**phone_request()).choices[0].message
        assert message.content == content
        assert ((message.model_extra or {}).get("reasoning_content") or "") == reasoning
        streamed_reasoning, streamed_content = "", ""
        for chunk in client.chat.completions.create(**phone_request(), stream=True):
            for choice in chunk.choices:
                streamed_reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
                streamed_content += choice.delta.content or ""
        assert (streamed_reasoning, streamed_content) == (reasoning, content)
    finally:
        running.stop()
