"""Token quotas under concurrency: 128 requests sent together, or one request of 16 sequences, never spend
more than the tenant's budget, with the counts in this process or in a real redis-server."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from autoglm.server.tenants.rate_limits import LimitWindows
from tests.server.live_server import start_server
from tests.server.manual_clock import ManualClock
from tests.server.redis_server import running_redis
from tests.server.tenants_files import TenantsFixture, bearer

BUDGET = 2_000
CONCURRENT = 128
MAX_TOKENS = 24
PROMPT = "Hello world"  # 7 tokens: each request reserves 7 + 24 = 31, so 64 of them fit in the budget
RESERVED = 7 + MAX_TOKENS
SETTINGS = ("tokens_per_minute", "tokens_per_day")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=["memory", "redis"])
def quota_server(request, chat_model, tmp_path_factory):
    """A server whose tenants each have one budget of BUDGET tokens (per minute, per day, per minute for
    n = 16), its windows cut from a clock that stands still."""
    folder = tmp_path_factory.mktemp("quotas")
    tenants = TenantsFixture(tenants=[{"id": setting.replace("_", "-"), "limits": {setting: BUDGET}}
                                      for setting in SETTINGS] + [{"id": "wide", "limits": {SETTINGS[0]: BUDGET}}])
    for tenant in tenants.tenants:
        tenants.add_key(tenant["id"], tenant["id"])
    settings = {"tenants_file": str(tenants.write(folder / "tenants.yaml")), "limit_windows":
                LimitWindows(clock=ManualClock())}
    if request.param == "memory":
        server = start_server(chat_model, **settings)
        yield server, tenants.keys
        server.stop()
        return
    with running_redis(folder) as redis:
        server = start_server(chat_model, rate_limit_storage=redis.url, **settings)
        yield server, tenants.keys
        server.stop()


async def send_together(url: str, key: str, count: int, **body: object) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(base_url=url, headers=bearer(key), timeout=120, limits=limits) as client:
        return await asyncio.gather(*(client.post("/v1/completions", json={"prompt": PROMPT, "ignore_eos": True,
                                                                             **body}) for _ in range(count)))


def spent(answers: list[httpx.Response]) -> int:
    """The tokens the answered requests used, checking every other answer is a 429 for tokens."""
    for answer in answers:
        assert answer.status_code in (200, 429), answer.text
        if answer.status_code == 429:
            assert answer.json()["error"]["type"] == "tokens"
    return sum(answer.json()["usage"]["total_tokens"] for answer in answers if answer.status_code == 200)


@pytest.mark.parametrize("setting", SETTINGS)
def test_128_concurrent_requests_stay_within_the_budget(quota_server, setting):
    server, keys = quota_server
    answers = asyncio.run(send_together(server.url, keys[setting.replace("_", "-")], CONCURRENT,
                                        max_tokens=MAX_TOKENS))
    used = spent(answers)
    assert used <= BUDGET  # before reservations: 12.9x
    # Each used all it reserved and gave nothing back, so the first refusal is a true one: admission is
    # not so wary that it leaves a whole request's room unspent.
    assert used == BUDGET // RESERVED * RESERVED


def test_requests_of_16_sequences_stay_within_the_budget(quota_server):
    server, keys = quota_server
    answers = asyncio.run(send_together(server.url, keys["wide"], 4, n=16, max_tokens=100))
    assert [answer.status_code for answer in answers].count(200) == 1  # 7 + 16 x 100 tokens: one fits
    assert spent(answers) == 7 + 16 * 100  # before reservations: 1.9x of the budget from one request
    too_large = httpx.post(server.url + "/v1/completions", headers=bearer(keys["wide"]), timeout=60,
                           json={"prompt": PROMPT, "n": 16, "max_tokens": 200})
    assert too_large.status_code == 400 and too_large.json()["error"]["param"] == "max_tokens"
    assert "ask for at most 124 max_tokens" in too_large.json()["error"]["message"]
