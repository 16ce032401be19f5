"""Prefix-cache isolation against a live server, through the openai client: a prompt one tenant
sent is cached for it alone, unless the tenants file gives two tenants the same cache salt."""
from __future__ import annotations

import openai
import pytest

from tests.server.tenants_files import TenantsFixture, serve_tenants

MODEL = "tiny-llama"
PROMPT = "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune"


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[
        {"id": "alpha"},
        {"id": "beta"},
        {"id": "team-one", "cache_salt": "team"},
        {"id": "team-two", "cache_salt": "team"},
    ])
    for tenant in ("alpha", "beta", "team-one", "team-two"):
        fixture.add_key(tenant, tenant)
    return fixture


@pytest.fixture(scope="module")
def keyed_server(chat_model, tenants, tmp_path_factory):
    running = serve_tenants(chat_model, tenants, tmp_path_factory.mktemp("tenants"), served_model_name=MODEL)
    yield running
    running.stop()


def cached_tokens(server, key: str, prompt: str) -> tuple[int, int]:
    """(cached, prompt) tokens of a one-token completion of `prompt` sent with `key`."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=60)
    usage = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1).usage
    return usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens


def full_hit(server, prompt_tokens: int) -> int:
    """What the cache can serve of a prompt: its whole blocks, short of the last token."""
    block_size = server.state.config.engine.cache.block_size
    return (prompt_tokens - 1) // block_size * block_size


def test_a_prompt_cached_by_one_tenant_gives_another_nothing_and_itself_the_full_hit(keyed_server, tenants):
    alpha, beta = tenants.keys["alpha"], tenants.keys["beta"]
    cached, prompt_tokens = cached_tokens(keyed_server, alpha, PROMPT)
    assert cached == 0 and full_hit(keyed_server, prompt_tokens) > 0
    assert cached_tokens(keyed_server, beta, PROMPT) == (0, prompt_tokens)
    assert cached_tokens(keyed_server, alpha, PROMPT) == (full_hit(keyed_server, prompt_tokens), prompt_tokens)


def test_tenants_with_the_same_cache_salt_share_cached_prefixes(keyed_server, tenants):
    prompt = PROMPT + ", or to take arms against a sea of troubles"
    cached, prompt_tokens = cached_tokens(keyed_server, tenants.keys["team-one"], prompt)
    assert cached == 0
    assert cached_tokens(keyed_server, tenants.keys["team-two"], prompt) == (full_hit(keyed_server, prompt_tokens),
                                                                             prompt_tokens)
