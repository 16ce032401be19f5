"""Each tenant's prefix cache is its own: a prompt one tenant cached is a miss for every other,
unless both name the same cache salt."""
from __future__ import annotations

import itertools

from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sequence import TenantTag
from autoglm.sampling_params import SamplingParams
from tests.engine.scripted_engine import scripted_engine

PROMPT = list(range(100, 140))  # 40 tokens: two full blocks of 16 can come from the cache
FULL_HIT = 32
_request_ids = itertools.count()


def cached_tokens(engine: LLMEngine, tenant: TenantTag | None) -> int:
    """Prompt tokens of PROMPT served from the prefix cache for a request of ``tenant``."""
    engine.add_request(str(next(_request_ids)), PROMPT, SamplingParams(max_tokens=1), tenant=tenant)
    while engine.has_unfinished_requests():
        for output in engine.step():
            if output.finished:
                return output.num_cached_tokens
    raise AssertionError("the request never finished")


def test_a_prompt_cached_for_one_tenant_is_a_miss_for_another_and_a_hit_for_itself():
    engine = scripted_engine(num_blocks=64, block_size=16)
    assert cached_tokens(engine, TenantTag("a")) == 0
    assert cached_tokens(engine, TenantTag("b")) == 0
    assert cached_tokens(engine, None) == 0  # requests without a tenant see neither
    assert cached_tokens(engine, TenantTag("a")) == FULL_HIT
    assert cached_tokens(engine, TenantTag("b")) == FULL_HIT
    assert cached_tokens(engine, None) == FULL_HIT


def test_tenants_naming_the_same_cache_salt_share_it_and_no_salt_names_a_tenants_own():
    engine = scripted_engine(num_blocks=64, block_size=16)
    assert cached_tokens(engine, TenantTag("a", cache_salt="team")) == 0
    assert cached_tokens(engine, TenantTag("b", cache_salt="team")) == FULL_HIT
    assert cached_tokens(engine, TenantTag("team")) == 0  # its own cache, not the salt 'team'
    assert cached_tokens(engine, TenantTag("c", cache_salt="a")) == 0  # nor tenant a's
