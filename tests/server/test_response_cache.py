"""The response cache in a live server: a deterministic request twice is a miss then a hit with the same
answer, whole or streamed either way; unseeded sampling is never cached; the header, the metrics, and a
tenant's usage say what the cache did."""
from __future__ import annotations

import json

import httpx
import pytest

from autoglm.server.response_cache.outcome import CACHE_HEADER
from tests.server.live_server import RunningServer, sse_payloads, start_server
from tests.server.tenants_files import TenantsFixture, bearer, serve_tenants

GREEDY = {"prompt": "Hello there", "max_tokens": 12, "temperature": 0, "ignore_eos": True}
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def cached_server(chat_model) -> RunningServer:
    running = start_server(chat_model, served_model_name="tiny", response_cache="memory")
    yield running
    running.stop()


def post(server: RunningServer, body: dict[str, object], route: str = "/v1/completions",
         headers: dict[str, str] | None = None) -> httpx.Response:
    answer = httpx.post(server.url + route, json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def stream(server: RunningServer, body: dict[str, object], route: str = "/v1/completions") -> tuple[str, list]:
    """The cache header and the parsed chunks of a streamed answer (the closing [DONE] left out)."""
    with httpx.stream("POST", server.url + route, json={**body, "stream": True}, timeout=60) as answer:
        assert answer.status_code == 200
        payloads = sse_payloads(answer)
    assert payloads[-1] == "[DONE]"
    return answer.headers[CACHE_HEADER], [json.loads(payload) for payload in payloads[:-1]]


def without_identity(chunk: dict[str, object]) -> dict[str, object]:
    return {name: value for name, value in chunk.items() if name not in ("id", "created")}


def counter(server: RunningServer, name: str) -> float:
    return server.metrics().get(f"autoglm:response_cache_{name}_total{{model=tiny,version=}}", 0.0)


def test_a_greedy_request_twice_is_a_miss_then_a_hit_with_the_same_answer(cached_server):
    body = {**GREEDY, "prompt": "Once upon", "logprobs": 2, "echo": True}
    first, second = post(cached_server, body), post(cached_server, body)
    assert (first.headers[CACHE_HEADER], second.headers[CACHE_HEADER]) == ("miss", "hit")
    assert second.json()["choices"] == first.json()["choices"]
    assert second.json()["usage"] == first.json()["usage"]
    assert second.json()["id"] != first.json()["id"]  # a hit is a response of its own


@pytest.mark.parametrize("route, body", [("/v1/completions", {**GREEDY, "prompt": "Streams"}),
                                         ("/v1/chat/completions", CHAT)])
def test_a_streamed_hit_streams_the_chunks_a_live_stream_sends(cached_server, route, body):
    live_header, live = stream(cached_server, body, route)
    hit_header, hit = stream(cached_server, body, route)
    assert (live_header, hit_header) == ("miss", "hit")
    # Chunk for chunk as the live stream was cut (how many depends on how far the engine ran ahead of the
    # stream's reads: it merges what was waiting), not one piece.
    assert [without_identity(chunk) for chunk in hit] == [without_identity(chunk) for chunk in live]
    assert len({chunk["id"] for chunk in hit} | {chunk["id"] for chunk in live}) == 2


def test_an_answer_kept_whole_is_streamed_and_one_kept_streamed_is_answered_whole(cached_server):
    whole = post(cached_server, {**GREEDY, "prompt": "Whole first"})
    header, chunks = stream(cached_server, {**GREEDY, "prompt": "Whole first", "stream_options":
                                            {"include_usage": True}})
    assert (whole.headers[CACHE_HEADER], header) == ("miss", "hit")
    assert "".join(choice["text"] for chunk in chunks for choice in chunk["choices"]) == \
        whole.json()["choices"][0]["text"]
    assert chunks[-1]["usage"] == whole.json()["usage"]

    header, chunks = stream(cached_server, {**GREEDY, "prompt": "Streamed first"})
    whole = post(cached_server, {**GREEDY, "prompt": "Streamed first", "user": "someone else"})
    assert (header, whole.headers[CACHE_HEADER]) == ("miss", "hit")
    assert whole.json()["choices"][0]["text"] == "".join(c["text"] for chunk in chunks for c in chunk["choices"])


def test_sampling_without_a_seed_is_never_cached_and_with_one_it_is(cached_server):
    hits, misses = counter(cached_server, "hits"), counter(cached_server, "misses")
    sampled = {"prompt": "Dice", "max_tokens": 8, "temperature": 1.0, "n": 2}
    assert [post(cached_server, sampled).headers[CACHE_HEADER] for _ in range(2)] == ["bypass", "bypass"]
    assert (counter(cached_server, "hits"), counter(cached_server, "misses")) == (hits, misses)
    seeded = {**sampled, "seed": 11}
    first, second = post(cached_server, seeded), post(cached_server, seeded)
    assert (first.headers[CACHE_HEADER], second.headers[CACHE_HEADER]) == ("miss", "hit")
    assert second.json()["choices"] == first.json()["choices"]
    assert (counter(cached_server, "hits"), counter(cached_server, "misses")) == (hits + 1, misses + 1)


def test_a_changed_field_is_a_miss(cached_server):
    body = {**GREEDY, "prompt": "Changes"}
    post(cached_server, body)
    for change in ({"max_tokens": 11}, {"stop": "zz"}, {"logprobs": 1}, {"n": 2}, {"presence_penalty": 0.5}):
        assert post(cached_server, {**body, **change}).headers[CACHE_HEADER] == "miss", change


def test_a_hit_is_logged_as_one_and_left_out_of_the_engines_latencies(cached_server, caplog):
    body = {**GREEDY, "prompt": "Latency"}
    post(cached_server, body)
    latencies = ("time_to_first_token_seconds_count", "e2e_request_latency_seconds_count")
    before = [cached_server.metrics()[f"autoglm:{name}"] for name in latencies]
    with caplog.at_level("INFO", logger="autoglm.requests"):
        post(cached_server, body)
    assert [cached_server.metrics()[f"autoglm:{name}"] for name in latencies] == before
    assert cached_server.metrics()["autoglm:request_success_total{finished_reason=length}"] >= 2
    assert [json.loads(record.getMessage())["cache"] for record in caplog.records] == ["hit"]


def test_no_header_without_the_cache(server):
    assert CACHE_HEADER not in post(server, GREEDY).headers


def test_a_hit_counts_in_the_tenants_usage_flagged_cached_and_tenants_never_share(chat_model, tmp_path):
    tenants = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team-a"}, {"id": "team-b"}])
    admin, team_a, team_b = (tenants.add_key(f"{name}-key", name) for name in ("ops", "team-a", "team-b"))
    server = serve_tenants(chat_model, tenants, tmp_path, response_cache="memory")
    try:
        answers = [post(server, GREEDY, headers=bearer(key)) for key in (team_a, team_a, team_b)]
        usage = httpx.get(server.url + "/admin/usage", headers=bearer(admin), timeout=10).json()
    finally:
        server.stop()
    assert [answer.headers[CACHE_HEADER] for answer in answers] == ["miss", "hit", "miss"]
    by_tenant = {report["tenant"]: report["today"] for report in usage["data"]}
    tokens = answers[0].json()["usage"]
    assert by_tenant["team-a"] == {"requests": 2, "prompt_tokens": 2 * tokens["prompt_tokens"],
                                   "cached_tokens": 2 * tokens["prompt_tokens_details"]["cached_tokens"],
                                   "completion_tokens": 2 * tokens["completion_tokens"], "cached_requests": 1}
    assert by_tenant["team-b"]["requests"] == 1 and by_tenant["team-b"]["cached_requests"] == 0
