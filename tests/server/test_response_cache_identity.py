"""What produced an answer is part of its cache key: two deployments of one served name sharing a Redis
share entries only when their weights, files and numerics agree; a canary's answers and its stable's stay
apart; a tenants reload takes effect on entries already kept (a lost model is a 403, a new salt a miss)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from autoglm.server.response_cache.outcome import CACHE_HEADER
from tests.server.live_server import (
    CHAT_TEMPLATE, PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, start_server, wait_for_health,
)
from tests.server.model_versions import MODEL, PROMPT, operate, serve_registry
from tests.server.redis_server import running_redis
from tests.server.tenants_files import TenantsFixture, bearer
from tests.tiny_models import make_tiny_checkpoint

GREEDY = {"model": MODEL, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0,
        "ignore_eos": True}

pytestmark = pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)


def post(url: str, body: dict[str, object], route: str = "/v1/completions",
         headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url + route, json=body, headers=headers, timeout=60)


def answered(url: str, body: dict[str, object] = GREEDY, route: str = "/v1/completions",
             headers: dict[str, str] | None = None) -> tuple[str, list[dict[str, object]]]:
    """The cache header and the choices of a request that must succeed."""
    answer = post(url, body, route, headers)
    assert answer.status_code == 200, answer.text
    return answer.headers[CACHE_HEADER], answer.json()["choices"]


def served_once(model: Path, redis_url: str, requests: list[tuple[dict[str, object], str]],
                **settings: object) -> list[tuple[str, list[dict[str, object]]]]:
    """Start a deployment named MODEL on `redis_url`, send `requests` (body, route), stop it."""
    server = start_server(model, served_model_name=MODEL, response_cache=redis_url, **settings)
    try:
        return [answered(server.url, body, route) for body, route in requests]
    finally:
        server.stop()


@contextmanager
def serving_process(model: Path, redis_url: str):
    """`autoglm serve` of `model` as MODEL on `redis_url`, in a process of its own; yields its URL once started."""
    port = free_port()
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(model), "--port", str(port),
               "--served-model-name", MODEL, "--response-cache", redis_url, "--max-context-len", "256",
               "--kv-cache-memory", "4MiB", "--usage-db", ":memory:"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.slow
def test_server_processes_under_one_name_share_a_redis_entry_only_with_the_same_weights(chat_model, tmp_path):
    other_weights = make_tiny_checkpoint("llama", tmp_path / "other-weights", seed=2)
    same_weights = shutil.copytree(chat_model, tmp_path / "same-weights")  # another folder: the path is no part
    with running_redis(tmp_path) as redis_server, ExitStack() as servers:
        urls = [servers.enter_context(serving_process(model, redis_server.url))
                for model in (chat_model, other_weights)]  # starting side by side
        for url in urls:
            wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        (first, first_choices), (other, other_choices) = (answered(url) for url in urls)
        ((same, same_choices),) = served_once(same_weights, redis_server.url, [(GREEDY, "/v1/completions")])
    assert first == "miss"
    assert other == "miss" and other_choices != first_choices  # its own answer, not the first process's
    assert same == "hit" and same_choices == first_choices


@pytest.mark.cpu_isa
def test_deployments_of_one_name_share_a_redis_entry_only_when_dtype_and_files_agree(chat_model, tmp_path):
    other_template = shutil.copytree(chat_model, tmp_path / "other-template")
    (other_template / "chat_template.jinja").write_text("{# another template #}" + CHAT_TEMPLATE)
    other_config = shutil.copytree(chat_model, tmp_path / "other-config")
    (other_config / "generation_config.json").write_text('{"eos_token_id": 3}')
    completion, chat = (GREEDY, "/v1/completions"), (CHAT, "/v1/chat/completions")
    with running_redis(tmp_path) as redis_server:
        outcomes = served_once(chat_model, redis_server.url, [completion, chat])
        outcomes += served_once(chat_model, redis_server.url, [completion], dtype="bfloat16")
        outcomes += served_once(other_template, redis_server.url, [chat])
        outcomes += served_once(other_config, redis_server.url, [completion])
        outcomes += served_once(chat_model, redis_server.url, [completion, chat])  # the first again
    assert [outcome for outcome, _ in outcomes] == ["miss", "miss", "miss", "miss", "miss", "hit", "hit"]


def test_a_canary_never_gets_its_stables_cached_answers_nor_the_stable_the_canarys(registry_dir):
    server = serve_registry(registry_dir, response_cache="memory")
    try:
        stable = answered(server.url)
        assert operate(server.url, "canary", version="2", percent=100).status_code == 200
        canary = [answered(server.url) for _ in range(2)]
        assert operate(server.url, "canary", version="2", percent=0).status_code == 200
        stable_again = answered(server.url)
    finally:
        server.stop()
    assert stable[0] == "miss"
    assert [outcome for outcome, _ in canary] == ["miss", "hit"]
    assert canary[0][1] != stable[1]  # version 2 wrote its own answer
    assert stable_again == ("hit", stable[1])


def test_a_tenants_reload_takes_effect_on_cached_answers(chat_model, tmp_path):
    tenants = TenantsFixture(tenants=[{"id": "ops", "role": "admin"},
                                      {"id": "team-a", "models": [MODEL], "cache_salt": "docs"},
                                      {"id": "team-b", "models": [MODEL], "cache_salt": "docs"}])
    admin, team_a, team_b = (bearer(tenants.add_key(f"{name}-key", name)) for name in ("ops", "team-a", "team-b"))
    path = tenants.write(tmp_path / "tenants.yaml")
    server = start_server(chat_model, served_model_name=MODEL, tenants_file=str(path), response_cache="memory")

    def reload_with(team: str, **fields: object) -> None:
        for tenant in tenants.tenants:
            if tenant["id"] == team:
                tenant.update(fields)
        tenants.write(path)
        assert httpx.post(server.url + "/admin/reload", headers=admin, timeout=10).status_code == 200

    try:
        shared = [answered(server.url, headers=key)[0] for key in (team_a, team_b)]
        reload_with("team-b", cache_salt="team-b-only")
        salted = [answered(server.url, headers=team_b)[0] for _ in range(2)]
        reload_with("team-a", models=["another-model"])
        refused = post(server.url, GREEDY, headers=team_a)
    finally:
        server.stop()
    assert shared == ["miss", "hit"]  # one cache_salt: one tenant's answer serves the other
    assert salted == ["miss", "hit"]  # a new salt: entries of its own
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_allowed"
