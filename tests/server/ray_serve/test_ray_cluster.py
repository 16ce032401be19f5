"""Two replicas of the embedded model on a local Ray cluster, behind Ray's HTTP proxy.

One application for the module, on the folder's cluster (conftest.py): mixed traffic
through the official client answers as one server does, prompts sharing a long prefix stay on
one replica (whose own metrics port shows the cache hits), and a replica killed under load fails
only the requests it held before Ray replaces it. The kill comes last: it changes the replicas.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
import pytest
import ray
from openai import AsyncOpenAI
from ray import serve

from autoglm.config import AutoGLMConfig
from autoglm.model_paths import DEFAULT_MODEL_DIR, DEFAULT_MODEL_NAME
from autoglm.server.ray_serve.application import ENGINE_DEPLOYMENT, build_application
from autoglm.server.ray_serve.engine_replica import REPLICA_HEADER
from tests.server.live_server import (BASE_SETTINGS, free_port_pair, scrape_metrics, start_server,
                                      wait_until)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

APP_NAME = "autoglm-test"
NUM_REPLICAS = 2
# float32, where batching requests differently leaves greedy choices alone (bfloat16 sums can tip a near tie);
# prompts of 64 characters or more that begin alike share a replica.
ENGINE_SETTINGS = {"num_threads": 1, "dtype": "float32"}
SETTINGS = {**BASE_SETTINGS, **ENGINE_SETTINGS, "ray_min_replicas": NUM_REPLICAS, "ray_max_replicas": NUM_REPLICAS,
            "ray_prefix_routing_chars": 64, "kv_cache_memory": "16MiB"}
REPLICA = REPLICA_HEADER.decode()
PROMPTS = ["ROMEO:", "JULIET:\nO Romeo, Romeo!", "FRIAR LAURENCE:\nHoly", "MERCUTIO:\nA plague", "NURSE:\nMy lady",
           "First Citizen:\nBefore we proceed", "KING RICHARD III:\nNow is the winter", "HAMLET:\nTo be",
           "PORTIA:\nThe quality of mercy", "LEAR:\nBlow, winds"]
# As long as the model's context allows: many steps still to run when its client leaves.
STREAM_TOKENS = 240
SHARED_PREFIX = ("ROMEO:\nBut, soft! what light through yonder window breaks? It is the east, and Juliet is the sun. "
                 "Arise, fair sun, and kill the envious moon, who is already sick and pale with grief.\n")


@dataclass
class RayServe:
    url: str
    metrics_urls: list[str]

    def client(self, url: str | None = None) -> AsyncOpenAI:
        return AsyncOpenAI(base_url=(url or self.url) + "/v1", api_key="unused", max_retries=0, timeout=120)



@pytest.fixture(scope="module")
def ray_serve(ray_proxy_url):
    metrics_port = free_port_pair()
    config = AutoGLMConfig(**SETTINGS, ray_metrics_port=metrics_port)
    serve.run(build_application(config.server_config()), name=APP_NAME, route_prefix="/")
    yield RayServe(ray_proxy_url,
                   [f"http://127.0.0.1:{metrics_port + rank}/metrics" for rank in range(NUM_REPLICAS)])
    serve.delete(APP_NAME)


@pytest.fixture(scope="module")
def one_server():
    running = start_server(DEFAULT_MODEL_DIR, served_model_name=DEFAULT_MODEL_NAME, **ENGINE_SETTINGS)
    yield running
    running.stop()


async def answer(client: AsyncOpenAI, kind: int, prompt: str) -> str:
    """The greedy text of one request of `kind`: completion or chat, each whole or streamed."""
    common = {"model": DEFAULT_MODEL_NAME, "max_tokens": 8, "temperature": 0}
    if kind < 2:
        if kind == 0:
            return (await client.completions.create(prompt=prompt, **common)).choices[0].text
        return "".join([choice.text async for chunk in await client.completions.create(
            prompt=prompt, stream=True, **common) for choice in chunk.choices])
    messages = [{"role": "user", "content": prompt}]
    if kind == 2:
        return (await client.chat.completions.create(messages=messages, **common)).choices[0].message.content
    return "".join([choice.delta.content or "" async for chunk in await client.chat.completions.create(
        messages=messages, stream=True, **common) for choice in chunk.choices])


def test_mixed_requests_answer_as_one_server_does(ray_serve, one_server):
    requests = [(index % 4, PROMPTS[index % len(PROMPTS)]) for index in range(100)]

    async def run() -> tuple[list[str], dict[tuple[int, str], str]]:
        reference = ray_serve.client(one_server.url)  # whole answers: a stream's text is the same
        expected = {(kind & 2, prompt): await answer(reference, kind & 2, prompt) for kind, prompt in set(requests)}
        client, slots = ray_serve.client(), asyncio.Semaphore(16)

        async def limited(kind: int, prompt: str) -> str:
            async with slots:
                return await answer(client, kind, prompt)

        return await asyncio.gather(*(limited(kind, prompt) for kind, prompt in requests)), expected

    texts, expected = asyncio.run(asyncio.wait_for(run(), timeout=240))
    assert texts == [expected[kind & 2, prompt] for kind, prompt in requests]
    assert len(set(texts)) > 1


def test_errors_have_the_servers_shape_and_status(ray_serve, one_server):
    for path, body in (("/v1/completions", {"prompt": "x", "max_tokens": -1}),
                       ("/v1/chat/completions", {"messages": "not a list"}),
                       ("/v1/nothing-here", {})):
        through_ray = httpx.post(ray_serve.url + path, json=body, timeout=30)
        direct = httpx.post(one_server.url + path, json=body, timeout=30)
        assert (through_ray.status_code, through_ray.json()) == (direct.status_code, direct.json()), path
        assert through_ray.status_code in (400, 404)


def prefix_cache_hits(metrics_url: str) -> float:
    return scrape_metrics(metrics_url.removesuffix("/metrics"))["autoglm:prefix_cache_hits_total"]


def test_shared_prefix_requests_stay_on_one_replica_whose_metrics_show_the_hits(ray_serve):
    hits_before = [prefix_cache_hits(url) for url in ray_serve.metrics_urls]
    replicas = set()
    for question in ("Who speaks?", "Where is he?", "What breaks?", "Who is the sun?", "Why is the moon pale?"):
        response = httpx.post(ray_serve.url + "/v1/completions", timeout=60, json={
            "prompt": SHARED_PREFIX + question, "max_tokens": 2, "temperature": 0})
        assert response.status_code == 200
        replicas.add(response.headers[REPLICA])
    hits_added = [prefix_cache_hits(url) - before for url, before in zip(ray_serve.metrics_urls, hits_before)]
    assert len(replicas) == 1
    assert sorted(hits_added)[0] == 0 and sorted(hits_added)[1] > 0  # every request after the first hit, there
    for url in ray_serve.metrics_urls:  # each replica's full exposition, as Prometheus scrapes it
        assert "autoglm:num_requests_running" in httpx.get(url, timeout=10).text


def running_requests(ray_serve: RayServe) -> float:
    return sum(scrape_metrics(url.removesuffix("/metrics"))["autoglm:num_requests_running"]
               for url in ray_serve.metrics_urls)


def generated_tokens(ray_serve: RayServe) -> float:
    return sum(scrape_metrics(url.removesuffix("/metrics"))["autoglm:generation_tokens_total"]
               for url in ray_serve.metrics_urls)


def test_a_client_leaving_mid_stream_ends_its_request_on_the_replica(ray_serve):
    before = generated_tokens(ray_serve)
    body = {"prompt": "ROMEO:", "max_tokens": STREAM_TOKENS, "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", ray_serve.url + "/v1/completions", json=body, timeout=60) as streamed:
        lines = streamed.iter_lines()
        assert next(lines).startswith("data: ")  # running: its first token came; the client leaves at once
    assert wait_until(lambda: running_requests(ray_serve) == 0, timeout_s=120)  # a hang guard only
    # Ended by the disconnect (which reaches the engine through the ingress), not by its length: the stream
    # had many steps to go when it left (waiting to see it running in the metrics first gave an idle machine
    # time to finish it), and the counts come from the same engine snapshots as the running one.
    assert generated_tokens(ray_serve) - before < STREAM_TOKENS


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def engine_replica_ids() -> set[str]:
    prefix = f"SERVE_REPLICA::{APP_NAME}#{ENGINE_DEPLOYMENT}#"
    return {actor["name"].removeprefix(prefix) for actor in ray.util.list_named_actors(all_namespaces=True)
            if actor["name"].startswith(prefix)}


async def long_stream(http: httpx.AsyncClient, url: str, prompt: str, started: list[str]) -> tuple[str, bool]:
    """(the replica that took it, whether it ended with [DONE] and no error event)."""
    body = {"prompt": prompt, "max_tokens": STREAM_TOKENS, "temperature": 0, "ignore_eos": True, "stream": True}
    replica = ""
    try:
        async with http.stream("POST", url + "/v1/completions", json=body) as response:
            replica = response.headers[REPLICA]
            started.append(replica)
            events = [line.removeprefix("data: ") async for line in response.aiter_lines() if line.startswith("data: ")]
    except httpx.HTTPError:
        return replica, False
    return replica, events[-1:] == ["[DONE]"] and not any('"error"' in event for event in events[:-1])


def test_killing_a_replica_fails_only_its_requests_and_ray_replaces_it(ray_serve):
    async def run() -> tuple[str, list[tuple[str, bool]]]:
        started: list[str] = []
        async with httpx.AsyncClient(timeout=120) as http:
            streams = [asyncio.ensure_future(long_stream(http, ray_serve.url, prompt, started)) for prompt in PROMPTS]
            while len(started) < len(PROMPTS):  # every request is held by a replica
                await asyncio.sleep(0.01)
            victim = started[0]
            ray.kill(ray.get_actor(f"SERVE_REPLICA::{APP_NAME}#{ENGINE_DEPLOYMENT}#{victim}", namespace="serve"),
                     no_restart=True)
            return victim, await asyncio.gather(*streams)

    victim, results = asyncio.run(asyncio.wait_for(run(), timeout=120))
    assert all(replica == victim for replica, succeeded in results if not succeeded)
    assert any(not succeeded for _, succeeded in results)  # it held requests when it died

    def replaced() -> bool:
        """A new replica in the dead one's place, loaded: it took the dead one's rank, so its metrics port answers."""
        replicas = engine_replica_ids()
        return victim not in replicas and len(replicas) == NUM_REPLICAS and all(map(answers, ray_serve.metrics_urls))
    assert wait_until(replaced, timeout_s=120)
    assert wait_until(lambda: serve.status().applications[APP_NAME].deployments[ENGINE_DEPLOYMENT]
                      .replica_states.get("RUNNING") == NUM_REPLICAS, timeout_s=30)

    async def after() -> list[str]:
        return await asyncio.gather(*(answer(ray_serve.client(), 0, prompt) for prompt in PROMPTS))
    assert all(asyncio.run(after()))
    answered_by = {httpx.post(ray_serve.url + "/v1/completions", timeout=60,
                              json={"prompt": prompt, "max_tokens": 1}).headers[REPLICA] for prompt in PROMPTS}
    assert answered_by <= engine_replica_ids() and victim not in answered_by
