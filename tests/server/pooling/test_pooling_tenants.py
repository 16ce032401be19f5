"""Pooling requests of keyed tenants: counted in usage as generation is, within their limits, by roles that may
generate."""
from __future__ import annotations

import httpx
import pytest

from tests.pooling.checkpoints import make_embedding_checkpoint
from tests.server.tenants_files import TenantsFixture, bearer, serve_tenants

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello world!"]


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team"},
                                      {"id": "small", "limits": {"tokens_per_minute": 5}},
                                      {"id": "viewers", "role": "reader"}])
    for tenant in ("ops", "team", "small", "viewers"):
        fixture.add_key(f"{tenant}-key", tenant)
    return fixture


@pytest.fixture(scope="module")
def keyed_server(tenants, tmp_path_factory):
    folder = tmp_path_factory.mktemp("keyed-embedding")
    running = serve_tenants(make_embedding_checkpoint(folder / "model"), tenants, folder, max_context_len=64)
    yield running
    running.stop()


def embed(server, key: str, texts: list[str]) -> httpx.Response:
    return httpx.post(server.url + "/v1/embeddings", headers=bearer(key), json={"input": texts}, timeout=60)


def test_usage_counts_a_tenants_embeddings(keyed_server, tenants):
    answer = embed(keyed_server, tenants.keys["team-key"], TEXTS)
    assert answer.status_code == 200, answer.text
    prompt_tokens = answer.json()["usage"]["prompt_tokens"]
    usage = httpx.get(keyed_server.url + "/admin/usage", headers=bearer(tenants.keys["ops-key"]), timeout=10)
    team = next(row for row in usage.json()["data"] if row["tenant"] == "team")
    assert team["today"]["requests"] == 1 and team["today"]["prompt_tokens"] == prompt_tokens
    assert team["today"]["completion_tokens"] == 0


def test_a_reader_may_not_pool_and_a_tenant_stays_within_its_tokens(keyed_server, tenants):
    refused = embed(keyed_server, tenants.keys["viewers-key"], TEXTS)
    assert refused.status_code == 403 and "may list models" in refused.json()["error"]["message"]
    too_long = embed(keyed_server, tenants.keys["small-key"], TEXTS)
    assert too_long.status_code == 400
    assert "tokens_per_minute of 5" in too_long.json()["error"]["message"]
    assert embed(keyed_server, tenants.keys["small-key"], ["Hi"]).status_code == 200
