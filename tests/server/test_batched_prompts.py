"""/v1/completions with a batch of prompts, as evaluation harnesses send them, and best_of."""
from __future__ import annotations

import json
import logging

import httpx
import pytest

from tests.server.live_server import sse_payloads, wait_until
from tests.server.test_errors import error_of, post

MODEL = "tiny-llama"
PROMPTS = ["Hello world", "To be, or not to be"]
GREEDY = {"temperature": 0, "extra_body": {"ignore_eos": True}}

pytestmark = pytest.mark.timeout(60)


def token_ids(server, text: str) -> list[int]:
    return httpx.post(server.url + "/tokenize", json={"prompt": text}).json()["tokens"]


def test_a_batch_of_prompts_answers_n_choices_per_prompt_in_prompt_order(server):
    client = server.openai()
    alone = [client.completions.create(model=MODEL, prompt=prompt, max_tokens=4, **GREEDY) for prompt in PROMPTS]
    batch = client.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=4, n=2, **GREEDY)
    assert [choice.index for choice in batch.choices] == [0, 1, 2, 3]
    assert [choice.text for choice in batch.choices] == [single.choices[0].text for single in alone for _ in "nn"]
    assert batch.usage.prompt_tokens == sum(single.usage.prompt_tokens for single in alone)
    assert batch.usage.completion_tokens == 16
    as_token_ids = client.completions.create(model=MODEL, prompt=[token_ids(server, p) for p in PROMPTS],
                                             max_tokens=4, **GREEDY)
    assert [choice.text for choice in as_token_ids.choices] == [single.choices[0].text for single in alone]
    one_token_list = client.completions.create(model=MODEL, prompt=token_ids(server, PROMPTS[1]), max_tokens=4,
                                               **GREEDY)
    assert [choice.text for choice in one_token_list.choices] == [alone[1].choices[0].text]


def test_a_streamed_batch_numbers_choices_across_prompts_and_sums_usage(server):
    client = server.openai()
    whole = client.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=5, n=2, **GREEDY)
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=5, n=2, stream=True,
                                            stream_options={"include_usage": True}, **GREEDY))
    for choice in whole.choices:
        assert "".join(c.text for chunk in chunks for c in chunk.choices if c.index == choice.index) == choice.text
        finishes = [c.finish_reason for chunk in chunks for c in chunk.choices if c.index == choice.index]
        assert finishes[-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_a_batch_logs_one_line_with_its_summed_counts(server, caplog):
    with caplog.at_level(logging.INFO, logger="autoglm.requests"):
        batch = server.openai().completions.create(model=MODEL, prompt=PROMPTS, max_tokens=3, **GREEDY)
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "autoglm.requests"]
    assert len(lines) == 1 and lines[0]["request_id"] == batch.id
    assert (lines[0]["prompt_tokens"], lines[0]["completion_tokens"]) == (batch.usage.prompt_tokens, 6)


def test_echo_and_logprobs_come_per_prompt(server):
    batch = server.openai().completions.create(model=MODEL, prompt=PROMPTS, max_tokens=3, echo=True, logprobs=1,
                                               **GREEDY)
    for prompt, choice in zip(PROMPTS, batch.choices, strict=True):
        assert choice.text.startswith(prompt)
        num_prompt = len(token_ids(server, prompt))
        assert len(choice.logprobs.tokens) == len(choice.logprobs.token_logprobs) == num_prompt + 3
        assert choice.logprobs.token_logprobs[0] is None and choice.logprobs.text_offset[0] == 0
    # The scoring request lm-evaluation-harness sends for a batch of loglikelihood questions.
    scored = post(server, "/v1/completions", json={"model": MODEL, "prompt": [token_ids(server, p) for p in PROMPTS],
                                                   "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0,
                                                   "seed": 1234})
    assert scored.status_code == 200 and len(scored.json()["choices"]) == 2


def test_one_refused_prompt_refuses_the_whole_batch_and_runs_nothing(server):
    too_long = "Hello world " * 200
    for stream in (False, True):
        response = post(server, "/v1/completions", json={"prompt": ["Hello", too_long], "max_tokens": 2,
                                                         "stream": stream})
        assert response.status_code == 400 and error_of(response)["code"] == "context_length_exceeded"
    engine = server.state.engine.engine
    assert wait_until(lambda: not engine.has_unfinished_requests())
    assert server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0


def test_best_of_returns_the_candidates_with_the_highest_cumulative_logprob(server):
    client = server.openai()
    sampled = {"model": MODEL, "prompt": PROMPTS, "max_tokens": 6, "temperature": 1.0, "seed": 11,
               "extra_body": {"ignore_eos": True}}
    candidates = client.completions.create(n=4, logprobs=0, **sampled)  # what best_of=4 draws, with the same seeds
    best = client.completions.create(n=2, best_of=4, **sampled)
    for prompt_index in range(len(PROMPTS)):
        drawn = candidates.choices[prompt_index * 4:(prompt_index + 1) * 4]
        ranked = sorted(drawn, key=lambda choice: sum(choice.logprobs.token_logprobs), reverse=True)
        chosen = best.choices[prompt_index * 2:(prompt_index + 1) * 2]
        assert [choice.index for choice in chosen] == [prompt_index * 2, prompt_index * 2 + 1]
        assert [choice.text for choice in chosen] == [choice.text for choice in ranked[:2]]
        assert all(choice.logprobs is None for choice in chosen)
    assert best.usage.completion_tokens == candidates.usage.completion_tokens == 2 * 4 * 6


@pytest.mark.parametrize("body, message", [
    ({"n": 3, "best_of": 2}, "best_of must be >= n (3), got 2"),
    ({"best_of": 2, "stream": True}, "best_of cannot be used with stream"),
    ({"best_of": 17}, "best_of must be in [1, 16], got 17"),
])
def test_bad_best_of_is_400(server, body, message):
    response = post(server, "/v1/completions", json={"prompt": PROMPTS[0], "max_tokens": 2, **body})
    assert response.status_code == 400
    assert error_of(response)["param"] == "best_of" and message in error_of(response)["message"]


def test_best_of_equal_to_n_streams_each_choice_as_the_whole_answer_gives_it(server):
    body = {"prompt": PROMPTS[0], "max_tokens": 4, "n": 2, "best_of": 2, "temperature": 1.0, "seed": 13,
            "ignore_eos": True}
    whole = post(server, "/v1/completions", json=body).json()["choices"]
    with httpx.stream("POST", server.url + "/v1/completions", json={**body, "stream": True}) as response:
        payloads = sse_payloads(response)
    assert response.status_code == 200 and payloads[-1] == "[DONE]"
    texts: dict[int, str] = {}
    for chunk in map(json.loads, payloads[:-1]):
        for choice in chunk["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
    assert texts == {choice["index"]: choice["text"] for choice in whole} and len(texts) == 2
    assert texts[0] != texts[1]  # two draws, not one sent twice
