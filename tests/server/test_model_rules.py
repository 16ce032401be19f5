"""The rules behind serving several versions, without a server: KV shares, the canary hash, automatic
rollback's window, which versions stay loaded, who may use the model admin routes."""
from __future__ import annotations

from pathlib import Path

import pytest
from starlette.requests import Request

from autoglm.config import AutoGLMConfig
from autoglm.server.openai.errors import APIError
from autoglm.server.versions.admin_routes import check_model_admin
from autoglm.server.versions.auto_rollback import CanaryWatch, RollbackThresholds
from autoglm.server.versions.canary import CanarySplit
from autoglm.server.versions.pool import kv_cache_share, version_config
from autoglm.server.versions.routing import ModelRoutes
from autoglm.server.observability.tracking import RequestOutcome

OK = RequestOutcome(status=200, time_to_first_token_s=0.1, prompt_tokens=3, completion_tokens=4)
FAILED = RequestOutcome(status=500, time_to_first_token_s=None, prompt_tokens=3, completion_tokens=0)


def test_each_version_gets_an_equal_share_of_the_kv_budget():
    assert kv_cache_share(3 * 1024**2, 3) == 1024**2
    assert kv_cache_share(0.9, 3) == pytest.approx(0.3)
    assert kv_cache_share("auto", 3) == "auto"


def test_a_version_runs_the_servers_engine_settings_on_its_own_checkpoint_and_kv_share():
    config = AutoGLMConfig(model="/models/served", tokenizer="/tokenizers/served", kv_cache_memory="6MiB",
                           max_loaded_versions=3, block_size=32, api_key="agk-secret").server_config()
    engine = version_config(config, Path("/registry/m/2"))
    assert engine.model.model == "/registry/m/2" and engine.model.tokenizer is None
    assert engine.cache.kv_cache_memory == 2 * 1024**2 and engine.cache.block_size == 32
    assert engine.scheduler == config.engine.scheduler and engine.device == config.engine.device
    assert config.engine.model.model == "/models/served"  # the server's own settings stay as they were


def test_the_canary_takes_a_deterministic_share_of_routing_keys():
    split = CanarySplit("2", 10)
    takes = [split.takes(f"user-{i}") for i in range(10_000)]
    assert 0.09 < sum(takes) / len(takes) < 0.11
    assert takes == [split.takes(f"user-{i}") for i in range(10_000)]
    assert not any(CanarySplit("2", 0.0).takes(f"user-{i}") for i in range(1000))
    assert all(CanarySplit("2", 100).takes(f"user-{i}") for i in range(1000))


def test_routes_keep_the_stable_the_previous_stable_the_canary_and_pinned_versions_loaded():
    routes = ModelRoutes("m", "3", previous_stables=["1", "2"], canary=CanarySplit("4", 50), pinned={"5"})
    assert routes.kept_loaded() == {"2", "3", "4", "5"}
    assert routes.aliases() == {"stable": "3", "canary": "4"}
    assert routes.target("stable", "anyone") == "3" and routes.target("1", "anyone") == "1"
    assert routes.target("canary", "anyone") == "4"


def _watch(clock: list[float], **overrides: object) -> CanaryWatch:
    thresholds = RollbackThresholds(**{"window_s": 60.0, "min_requests": 5, "max_error_rate": 0.2,
                                       "max_p99_ttft_s": None, **overrides})
    return CanaryWatch(thresholds, clock=lambda: clock[0])


def test_automatic_rollback_judges_the_error_rate_only_once_the_window_holds_enough_requests():
    clock = [0.0]
    watch = _watch(clock)
    assert [watch.record(FAILED) for _ in range(4)] == [None] * 4  # too few to judge
    assert "5 of its last 5 requests failed" in watch.record(FAILED)


def test_failures_older_than_the_window_are_forgotten():
    clock = [0.0]
    watch = _watch(clock)
    for _ in range(3):
        watch.record(FAILED)
    clock[0] = 61.0
    assert [watch.record(OK) for _ in range(5)] == [None] * 5


def test_automatic_rollback_judges_the_p99_time_to_first_token():
    clock = [0.0]
    watch = _watch(clock, max_p99_ttft_s=1.0)
    slow = RequestOutcome(status=200, time_to_first_token_s=2.5, prompt_tokens=3, completion_tokens=4)
    assert [watch.record(OK) for _ in range(4)] == [None] * 4
    assert "p99 time to first token" in watch.record(slow)


def _request_from(host: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/admin/models", "headers": [],
                    "client": (host, 50000), "state": {}})


def test_without_keys_the_model_admin_routes_answer_loopback_clients_only():
    check_model_admin(_request_from("127.0.0.1"))
    check_model_admin(_request_from("::1"))
    with pytest.raises(APIError) as refused:
        check_model_admin(_request_from("10.1.2.3"))
    assert refused.value.status == 403 and "10.1.2.3" in refused.value.body.error.message
