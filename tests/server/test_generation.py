"""Completions and chat over HTTP through the official client: whole, streamed, sampled, with log-probs."""
from __future__ import annotations

import json
import logging
import re

import httpx
import pytest

MODEL = "tiny-llama"
PROMPT = "Hello world"
MESSAGES = [{"role": "user", "content": "To be, or not to be"}]
GREEDY = {"temperature": 0, "extra_body": {"ignore_eos": True}}

pytestmark = pytest.mark.timeout(60)


def prompt_token_count(server, **body) -> int:
    return httpx.post(server.url + "/tokenize", json=body).json()["count"]


def test_completion_stream_equals_whole_text_and_usage_counts(server):
    client = server.openai()
    whole = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, **GREEDY)
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, stream=True,
                                            stream_options={"include_usage": True}, **GREEDY))

    assert whole.object == "text_completion" and whole.id.startswith("cmpl-") and whole.model == MODEL
    assert whole.choices[0].finish_reason == "length"
    streamed = "".join(choice.text for chunk in chunks for choice in chunk.choices)
    assert streamed == whole.choices[0].text
    assert chunks[-2].choices[0].finish_reason == "length"
    num_prompt = prompt_token_count(server, prompt=PROMPT)
    for usage in (whole.usage, chunks[-1].usage):
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (num_prompt, 12, num_prompt + 12)
    assert chunks[-1].choices == []


def test_chat_stream_equals_whole_message(server):
    client = server.openai()
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_completion_tokens=10, **GREEDY)
    chunks = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10, stream=True,
                                                 stream_options={"include_usage": True}, **GREEDY))

    message = whole.choices[0].message
    assert whole.object == "chat.completion" and message.role == "assistant"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == message.content
    num_prompt = prompt_token_count(server, messages=MESSAGES)
    assert whole.usage.prompt_tokens == chunks[-1].usage.prompt_tokens == num_prompt
    assert whole.usage.completion_tokens == chunks[-1].usage.completion_tokens == 10


def test_n_returns_independent_choices(server):
    result = server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=6, n=2, temperature=1.0,
                                                seed=3, extra_body={"ignore_eos": True})
    assert sorted(choice.index for choice in result.choices) == [0, 1]
    assert result.usage.completion_tokens == 12
    # At temperature 1 the tiny model gives each token a few percent at most: six equal draws
    # in a row would mean the choices share their randomness.
    assert result.choices[0].text != result.choices[1].text
    streamed = list(server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=6, n=2,
                                                       temperature=1.0, seed=3, stream=True,
                                                       extra_body={"ignore_eos": True}))
    for choice in result.choices:
        text = "".join(c.text for chunk in streamed for c in chunk.choices if c.index == choice.index)
        assert text == choice.text


def test_stop_string_cuts_the_text_before_it(server):
    client = server.openai()
    text = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, **GREEDY).choices[0].text
    match = re.compile(r"[A-Za-z]{2}").search(text, 1)
    assert match, f"the tiny model's output {text!r} has no two letters in a row to stop at"
    stopped = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, stop=[match.group()], **GREEDY)
    assert stopped.choices[0].text == text[:match.start()]
    assert stopped.choices[0].finish_reason == "stop"


def test_seed_makes_sampling_reproducible(server):
    client = server.openai()

    def sample(seed: int) -> str:
        return client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=1.0, seed=seed,
                                         extra_body={"ignore_eos": True}).choices[0].text

    assert sample(7) == sample(7)
    assert sample(7) != sample(8)


def test_completion_logprobs_and_echo(server):
    result = server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, logprobs=2, echo=True,
                                                **GREEDY)
    choice = result.choices[0]
    logprobs = choice.logprobs
    num_prompt = prompt_token_count(server, prompt=PROMPT)
    assert choice.text.startswith(PROMPT)
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.text_offset) == num_prompt + 5
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    assert logprobs.text_offset == sorted(logprobs.text_offset)
    for token, logprob, top in zip(logprobs.tokens[num_prompt:], logprobs.token_logprobs[num_prompt:],
                                   logprobs.top_logprobs[num_prompt:], strict=True):
        assert len(top) <= 2 and logprob <= 0
        assert max(top.values()) == pytest.approx(logprob)  # greedy picks the most likely token
        assert top.get(token) == pytest.approx(logprob)



@pytest.mark.parametrize("n", [2, 3])
def test_echo_with_logprobs_scores_the_prompt_once_per_choice_whatever_n(server, n):
    """Each of the n choices echoes the prompt with exactly one entry per prompt token, whole and
    streamed (the prompt used to be scored once per choice and answered 400 for n > 1)."""
    body = dict(model=MODEL, prompt=PROMPT, max_tokens=3, logprobs=1, echo=True, n=n, temperature=1.0, seed=5)
    whole = server.openai().completions.create(**body)
    num_prompt = prompt_token_count(server, prompt=PROMPT)
    assert [choice.index for choice in whole.choices] == list(range(n))
    for choice in whole.choices:
        assert choice.text.startswith(PROMPT)
        assert len(choice.logprobs.tokens) == len(choice.logprobs.token_logprobs) == num_prompt + 3
        assert choice.logprobs.token_logprobs[0] is None
        assert choice.logprobs.token_logprobs[1:num_prompt] == whole.choices[0].logprobs.token_logprobs[1:num_prompt]
    streamed: dict[int, list] = {}
    for chunk in server.openai().completions.create(**body, stream=True):
        for choice in chunk.choices:
            streamed.setdefault(choice.index, []).extend(choice.logprobs.tokens if choice.logprobs else [])
    assert {index: len(tokens) for index, tokens in streamed.items()} == {i: num_prompt + 3 for i in range(n)}


def test_chat_logprobs_shape(server):
    result = server.openai().chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, logprobs=True,
                                                     top_logprobs=3, **GREEDY)
    content = result.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
        assert entry.bytes == list(entry.token.encode("utf-8"))


def test_models_tokenize_detokenize_version(server):
    models = server.openai().models.list().data
    assert [model.id for model in models] == [MODEL]
    tokens = httpx.post(server.url + "/tokenize", json={"prompt": PROMPT}).json()
    assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 256
    assert httpx.post(server.url + "/detokenize", json={"tokens": tokens["tokens"]}).json() == {"prompt": PROMPT}
    assert httpx.get(server.url + "/version").json()["version"]


def test_each_request_logs_one_json_line(server, caplog):
    with caplog.at_level(logging.INFO, logger="autoglm.requests"):
        result = server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, **GREEDY)
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "autoglm.requests"]
    assert len(lines) == 1
    line = lines[0]
    assert line["request_id"] == result.id and line["model"] == MODEL and line["status"] == 200
    assert line["completion_tokens"] == 3 and line["prompt_tokens"] == result.usage.prompt_tokens
    assert line["finish_reason"] == "length"
    assert 0 <= line["queue_ms"] <= line["ttft_ms"] <= line["e2e_ms"]


def test_repeated_prompt_reports_cached_tokens(server):
    prompt = "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune"
    client = server.openai()
    first = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    second = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    block_size = server.state.config.engine.cache.block_size
    assert first.usage.prompt_tokens > block_size and first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens and cached % block_size == 0  # whole blocks only
