"""A canary split by a hash of the user, and automatic rollback when the canary fails."""
from __future__ import annotations

import logging
from collections import Counter

import httpx

from tests.server.live_server import wait_until
from tests.server.model_versions import MODEL, complete, operate, serve_registry, served_model

NUM_USERS = 400


def test_a_25_percent_canary_takes_a_quarter_of_distinct_users_and_each_user_stays_on_one_version(registry_dir):
    served = serve_registry(registry_dir)
    try:
        split = operate(served.url, "canary", version="2", percent=25)
        assert split.status_code == 200, split.text
        assert split.json()["canary"] == {"version": "2", "percent": 25.0}
        assert split.json()["aliases"] == {"stable": "1", "canary": "2"}
        with httpx.Client(base_url=served.url, timeout=60) as client:
            def version_for(user: str) -> str:
                body = {"model": MODEL, "prompt": "Hi", "max_tokens": 1, "user": user}
                return client.post("/v1/completions", json=body).json()["model"]

            first = {f"user-{i}": version_for(f"user-{i}") for i in range(NUM_USERS)}
            again = {user: version_for(user) for user in list(first)[:50]}
        share = Counter(first.values())[f"{MODEL}@2"] / NUM_USERS
        assert 0.20 <= share <= 0.30, share
        assert all(again[user] == first[user] for user in again)
        cleared = operate(served.url, "canary", version="2", percent=0).json()
        assert cleared["canary"] is None and "canary" not in cleared["aliases"]
        assert {complete(served.url, user=f"user-{i}")["model"] for i in range(20)} == {f"{MODEL}@1"}
    finally:
        served.stop()


def test_automatic_rollback_sends_a_failing_canary_back_to_0_percent_and_says_why(registry_dir, monkeypatch, caplog):
    served = serve_registry(registry_dir, auto_rollback=True, auto_rollback_min_requests=5,
                            auto_rollback_max_error_rate=0.2)
    try:
        canary = next(version for version in served.state.pool.held() if version.version == "2")

        def broken_step():
            raise RuntimeError("injected failure")

        monkeypatch.setattr(canary.engine.engine, "step", broken_step)
        assert operate(served.url, "canary", version="2", percent=50).status_code == 200
        with caplog.at_level(logging.WARNING, logger="autoglm.server.versions.lifecycle"):
            statuses = Counter(httpx.post(served.url + "/v1/completions", timeout=60,
                                          json={"model": MODEL, "prompt": "Hi", "max_tokens": 2,
                                                "user": f"user-{i}"}).status_code
                               for i in range(40))
            assert wait_until(lambda: served_model(served.url)["canary"] is None)
        assert statuses[500] >= 5  # the canary's failures that triggered it, no more than its window needed
        assert any("automatic rollback" in record.message and "failed" in record.message
                   for record in caplog.records)
        assert {complete(served.url, user=f"user-{i}")["model"] for i in range(20)} == {f"{MODEL}@1"}
    finally:
        served.stop()


def test_a_canary_percent_outside_0_to_100_is_refused(registry_dir):
    served = serve_registry(registry_dir, references=(MODEL,))
    try:
        for percent in (-1, 101):
            response = operate(served.url, "canary", version="2", percent=percent)
            assert response.status_code == 400 and "percent" in response.json()["error"]["message"]
    finally:
        served.stop()
