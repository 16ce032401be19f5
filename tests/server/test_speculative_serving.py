"""Speculative decoding served over HTTP gives what plain decoding gives: streamed deltas of several
tokens arrive whole and in order, stop strings inside an accepted run cut where plain decoding cuts,
min_tokens holds, and log-probs match within 1e-4 (float32)."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.server.live_server import start_server

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
# Token-id prompts that repeat themselves, so n-gram lookup finds matches.
PROMPTS = [[3 + (i * 7 + j * 5) % 40 for j in range(6 + 3 * i)] * 3 for i in range(4)]
GREEDY = {"max_tokens": 32, "temperature": 0, "ignore_eos": True, "logprobs": 2}


@pytest.fixture(scope="module")
def speculative_server(chat_model):
    running = start_server(chat_model, served_model_name="tiny-llama", speculative_config=NGRAM)
    yield running
    running.stop()


def complete(server, **body) -> dict:
    response = httpx.post(server.url + "/v1/completions", json={"model": "tiny-llama", **body}, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


def streamed_chunks(server, **body) -> list[dict]:
    """Each streamed chunk's choice, in the order they came."""
    with httpx.stream("POST", server.url + "/v1/completions", timeout=120,
                      json={"model": "tiny-llama", "stream": True, **body}) as response:
        assert response.status_code == 200
        lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [choice for line in lines[:-1] for choice in json.loads(line)["choices"]]


def accepted_tokens(server) -> float:
    return server.metrics()["autoglm:spec_decode_num_accepted_tokens_total"]


def assert_same_logprobs(got: dict, expected: dict) -> None:
    assert got["tokens"] == expected["tokens"]
    assert got["token_logprobs"] == pytest.approx(expected["token_logprobs"], abs=1e-4)
    for got_top, expected_top in zip(got["top_logprobs"], expected["top_logprobs"]):
        assert got_top.keys() == expected_top.keys()
        assert list(got_top.values()) == pytest.approx(list(expected_top.values()), abs=1e-4)


def test_text_and_logprobs_equal_plain_decodings(server, speculative_server):
    accepted = accepted_tokens(speculative_server)
    for prompt in PROMPTS:
        got = complete(speculative_server, prompt=prompt, **GREEDY)
        expected = complete(server, prompt=prompt, **GREEDY)
        assert got["text"] == expected["text"] and got["finish_reason"] == expected["finish_reason"]
        assert_same_logprobs(got["logprobs"], expected["logprobs"])
    assert accepted_tokens(speculative_server) > accepted  # runs of several tokens were served


def test_streamed_deltas_of_several_tokens_arrive_whole_and_in_order(server, speculative_server):
    chunks = [chunk for prompt in PROMPTS for chunk in streamed_chunks(speculative_server, prompt=prompt, **GREEDY)]
    assert max(len(chunk["logprobs"]["tokens"]) for chunk in chunks) > 1  # some deltas carry a run
    for prompt in PROMPTS:
        chunks = streamed_chunks(speculative_server, prompt=prompt, **GREEDY)
        expected = complete(server, prompt=prompt, **GREEDY)
        assert "".join(chunk["text"] for chunk in chunks) == expected["text"]
        assert [t for chunk in chunks for t in chunk["logprobs"]["tokens"]] == expected["logprobs"]["tokens"]
        values = [v for chunk in chunks for v in chunk["logprobs"]["token_logprobs"]]
        assert values == pytest.approx(expected["logprobs"]["token_logprobs"], abs=1e-4)


def stop_strings(text: str) -> list[str]:
    """Pieces of a plain decoding's text, starting at several places, each a stop string to try."""
    return [text[start:start + 3] for start in range(2, len(text) - 3, max(1, len(text) // 6))
            if text[start:start + 3].strip()]


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_cut_where_plain_decoding_cuts(server, speculative_server, stream):
    params = {"max_tokens": 32, "temperature": 0, "ignore_eos": True}
    for prompt in PROMPTS:
        for stop in stop_strings(complete(server, prompt=prompt, **params)["text"]):
            expected = complete(server, prompt=prompt, stop=[stop], **params)
            if stream:
                chunks = streamed_chunks(speculative_server, prompt=prompt, stop=[stop], **params)
                got = {"text": "".join(c["text"] for c in chunks), "finish_reason": chunks[-1]["finish_reason"]}
            else:
                got = complete(speculative_server, prompt=prompt, stop=[stop], **params)
            assert (got["text"], got["finish_reason"]) == (expected["text"], expected["finish_reason"]), stop


def test_min_tokens_holds_back_a_stop_token_inside_an_accepted_run(server, speculative_server):
    finish_reasons = []
    for prompt in PROMPTS:
        plain = complete(server, prompt=prompt, max_tokens=32, temperature=0, ignore_eos=True, logprobs=0)
        tokens = plain["logprobs"]["tokens"]
        # The text's first token as a stop token: reached at once without min_tokens, later with it.
        first = httpx.post(server.url + "/tokenize", json={"model": "tiny-llama", "prompt": tokens[0],
                                                            "add_special_tokens": False}, timeout=30)
        stop_id = first.json()["tokens"][0] if first.status_code == 200 else None
        if stop_id is None:
            pytest.skip("no /tokenize route to find the stop token's id")
        params = {"max_tokens": 32, "temperature": 0, "ignore_eos": True, "stop_token_ids": [stop_id],
                  "min_tokens": 12}
        got = complete(speculative_server, prompt=prompt, **params)
        expected = complete(server, prompt=prompt, **params)
        assert (got["text"], got["finish_reason"]) == (expected["text"], expected["finish_reason"])
        finish_reasons.append(got["finish_reason"])
    assert "stop" in finish_reasons  # the stop token did come after min_tokens somewhere
