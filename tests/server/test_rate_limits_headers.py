"""OpenAI's rate-limit headers and durations, and the rate_limit_storage setting's startup errors."""
from __future__ import annotations

import sys

import pytest

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.server.tenants.rate_limit_headers import (
    RateLimitSnapshot,
    WindowState,
    openai_duration,
    rate_limit_headers,
    retry_after,
)
from autoglm.server.tenants.rate_limit_storage import rate_limit_storage


@pytest.mark.parametrize(("seconds", "written"), [
    (0, "0s"), (0.0201, "21ms"), (0.02, "20ms"), (0.999, "999ms"), (0.9995, "1s"), (1, "1s"), (1.2, "2s"),
    (59, "59s"), (60, "1m0s"), (360, "6m0s"), (3599.5, "1h0m0s"), (86_399, "23h59m59s"), (86_400, "24h0m0s"),
])
def test_durations_are_written_as_openai_writes_them_rounded_up(seconds, written):
    assert openai_duration(seconds) == written


@pytest.mark.parametrize(("seconds", "header"), [(0, "1"), (0.2, "1"), (1, "1"), (1.01, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_and_at_least_one(seconds, header):
    assert retry_after(seconds) == header


def test_headers_name_each_window_the_tenant_has():
    snapshot = RateLimitSnapshot(requests=WindowState(limit=60, remaining=59, reset_s=1.0),
                                 tokens=WindowState(limit=1000, remaining=0, reset_s=360))
    assert rate_limit_headers(snapshot) == {
        "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s",
    }
    only_tokens = RateLimitSnapshot(requests=None, tokens=WindowState(limit=10, remaining=3, reset_s=0.02))
    assert set(rate_limit_headers(only_tokens)) == {"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                                                    "x-ratelimit-reset-tokens"}
    assert rate_limit_headers(RateLimitSnapshot(requests=None, tokens=None)) == {}


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379", "redis://cache:6379/2", "rediss://user:secret@cache:6380"])
def test_redis_urls_are_accepted(url):
    assert AutoGLMConfig(rate_limit_storage=url).rate_limit_storage == url


@pytest.mark.parametrize("url", ["memory", "redis://", "http://cache:6379", "redis://cache:6379/db"])
def test_a_bad_storage_url_is_a_config_error_saying_what_is_allowed(url):
    with pytest.raises(ConfigError, match="rate_limit_storage.*expected 'memory://' or 'redis://HOST:PORT"):
        AutoGLMConfig(rate_limit_storage=url)


def test_a_redis_url_without_the_redis_client_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)  # as if the package were not installed
    with pytest.raises(ConfigError, match=r"pip install 'open-autoglm\[redis\]'"):
        rate_limit_storage("redis://127.0.0.1:6379")


def test_the_storage_setting_is_kept_out_of_printed_settings():
    assert "secret" not in repr(AutoGLMConfig(rate_limit_storage="redis://:secret@cache:6379"))
