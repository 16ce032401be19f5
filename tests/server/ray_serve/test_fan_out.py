"""Which admin calls go to every engine replica, and the one answer their answers make."""
from __future__ import annotations

import json

import pytest

from autoglm.server.ray_serve.fan_out import REPLICAS_HEADER, ReplicaAnswer, combined_answer, fans_out

JSON = [(b"content-type", b"application/json")]


@pytest.mark.parametrize("path", ["/admin/reload", "/admin/keys/team-key/revoke", "/admin/models/tiny/load",
                                  "/admin/models/tiny/unload", "/admin/models/tiny/promote",
                                  "/admin/models/tiny/rollback", "/admin/models/tiny/canary"])
def test_calls_that_change_a_replicas_state_go_to_every_replica(path):
    assert fans_out("POST", path)
    assert not fans_out("GET", path)


@pytest.mark.parametrize("path", ["/admin/tenants", "/admin/usage", "/admin/models", "/v1/completions",
                                  "/admin/keys/a/b/revoke", "/admin/models/tiny/promote/extra", "/admin/reloaded"])
def test_reads_and_inference_go_to_one_replica(path):
    assert not fans_out("POST", path)


def test_answers_alike_are_relayed_naming_every_replica():
    answers = [ReplicaAnswer(replica, 200, JSON, b'{"tenants": 2, "keys": 3}') for replica in ("b", "a")]
    response = combined_answer("POST", "/admin/reload", answers)
    assert response.status_code == 200 and json.loads(response.body) == {"tenants": 2, "keys": 3}
    assert response.headers[REPLICAS_HEADER.decode()] == "a,b"
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("second", [ReplicaAnswer("b", 404, JSON, b"{}"), ConnectionError("replica b died")])
def test_answers_that_differ_or_a_failed_replica_are_a_503_naming_each_outcome(second):
    response = combined_answer("POST", "/admin/keys/k/revoke", [ReplicaAnswer("a", 200, JSON, b"{}"), second])
    assert response.status_code == 503
    error = json.loads(response.body)["error"]
    assert error["code"] == "replicas_disagree"
    assert "POST /admin/keys/k/revoke did not succeed alike on every engine replica" in error["message"]
    assert "replica a answered 200" in error["message"]
    told = "replica b answered 404" if isinstance(second, ReplicaAnswer) else "ConnectionError: replica b died"
    assert told in error["message"]
