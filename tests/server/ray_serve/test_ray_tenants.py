"""Two keyed replicas on a local Ray cluster agree: a revoke, a reload (by the admin call or as SIGHUP has it)
and a promote or rollback reach both before the call answers, a canary one replica rolls back automatically
ends on both, and a tenant's rate limit, kept in a real redis-server, is one budget for both.

One application for the module, on the folder's cluster (conftest.py). Requests are sent to a chosen replica through prefix routing: a prompt's
replica is the one its text hashes to, so the module first finds a prompt for each replica.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from ray import serve

from autoglm.config import AutoGLMConfig
from autoglm.registry import DirectoryRegistry
from autoglm.server.ray_serve.application import ENGINE_DEPLOYMENT, build_application
from autoglm.server.ray_serve.engine_replica import REPLICA_HEADER
from autoglm.server.ray_serve.fan_out import REPLICAS_HEADER
from autoglm.server.ray_serve.launch import APP_NAME, reload_every_replica
from autoglm.server.tenants.keys import generate_key, hash_key
from tests.server.live_server import BASE_SETTINGS, wait_until
from tests.server.model_versions import MODEL
from tests.server.redis_server import running_redis
from tests.server.tenants_files import TenantsFixture, bearer

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

NUM_REPLICAS = 2
# A daily budget: a minute's window could end between two of the test's requests on a loaded machine.
REQUESTS_PER_DAY = 4
# A canary is rolled back automatically after this many requests on one replica: their time to first token is
# always over the limit.
CANARY_REQUESTS = 2
REPLICA = REPLICA_HEADER.decode()


@dataclass
class KeyedRay:
    url: str
    tenants_file: Path
    keys: dict[str, str]
    prompts: dict[str, str]  # replica -> a prompt routed to it

    def complete(self, key: str, replica: str) -> httpx.Response:
        """A one-token completion sent to `replica`, answered by it."""
        response = httpx.post(self.url + "/v1/completions", headers=bearer(key), timeout=60, json={
            "model": MODEL, "prompt": self.prompts[replica], "max_tokens": 1, "temperature": 0})
        assert response.headers[REPLICA] == replica
        return response

    def admin(self, path: str, **body: object) -> httpx.Response:
        return httpx.post(self.url + path, headers=bearer(self.keys["admin"]), json=body, timeout=120)

    def canaries(self) -> list[dict | None]:
        """Each replica's canary of MODEL, asked of every replica at once (a request would count for the canary)."""
        scope = {"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http", "path": "/admin/models",
                 "raw_path": b"/admin/models", "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {self.keys['admin']}".encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        answers = serve.get_deployment_handle(ENGINE_DEPLOYMENT, APP_NAME).broadcast(
            "answer_whole", scope, b"").results(timeout_s=60)
        assert len(answers) == NUM_REPLICAS
        return [next(model["canary"] for model in json.loads(answer.body)["models"] if model["name"] == MODEL)
                for answer in answers]

    def add_tenant(self, name: str) -> str:
        """Write a new tenant with a key of its own into the tenants file, as it is on disk now; the key."""
        key = generate_key()
        data = yaml.safe_load(self.tenants_file.read_text())
        data["tenants"].append({"id": name})
        data["keys"].append({"id": name, "tenant": name, "hash": hash_key(key),
                             "created": "2026-01-01T00:00:00+00:00"})
        self.tenants_file.write_text(yaml.safe_dump(data))
        return key


def prompts_per_replica(url: str, key: str) -> dict[str, str]:
    """A prompt for each replica: prompts tried in turn until each replica has taken one."""
    prompts: dict[str, str] = {}
    for index in range(64):
        prompt = f"Probe {index}"
        response = httpx.post(url + "/v1/completions", headers=bearer(key), timeout=60,
                              json={"model": MODEL, "prompt": prompt, "max_tokens": 1})
        assert response.status_code == 200, response.text
        prompts.setdefault(response.headers[REPLICA], prompt)
        if len(prompts) == NUM_REPLICAS:
            return prompts
    raise AssertionError(f"64 prompts all went to {list(prompts)}")


@pytest.fixture(scope="module")
def keyed_ray(ray_proxy_url, versions_registry, tmp_path_factory) -> Iterator[KeyedRay]:
    folder = tmp_path_factory.mktemp("keyed-ray")
    tenants = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team"},
                                      {"id": "limited", "limits": {"requests_per_day": REQUESTS_PER_DAY}}])
    keys = {name: tenants.add_key(name, tenant) for name, tenant in
            (("admin", "ops"), ("doomed", "team"), ("limited", "limited"))}
    tenants_file = tenants.write(folder / "tenants.yaml")
    registry = Path(shutil.copytree(versions_registry, folder / "registry"))  # promotes move its aliases
    with running_redis(folder) as redis:
        config = AutoGLMConfig(**BASE_SETTINGS, num_threads=1, ray_min_replicas=NUM_REPLICAS,
                               ray_max_replicas=NUM_REPLICAS, ray_metrics_port=None, tenants_file=str(tenants_file),
                               rate_limit_storage=redis.url, serve_models=(MODEL,), registry_dir=str(registry),
                               auto_rollback=True, auto_rollback_min_requests=CANARY_REQUESTS,
                               auto_rollback_max_p99_ttft_s=1e-6,
                               model=str(DirectoryRegistry(registry).version(MODEL, "1").path))
        serve.run(build_application(config.server_config()), name=APP_NAME, route_prefix="/")
        try:
            yield KeyedRay(ray_proxy_url, tenants_file, keys, prompts_per_replica(ray_proxy_url, keys["admin"]))
        finally:
            serve.delete(APP_NAME)


def test_a_revoked_key_is_refused_by_every_replica(keyed_ray):
    replicas = sorted(keyed_ray.prompts)
    assert [keyed_ray.complete(keyed_ray.keys["doomed"], replica).status_code for replica in replicas] == [200, 200]
    revoked = keyed_ray.admin("/admin/keys/doomed/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    for replica in replicas:
        refused = keyed_ray.complete(keyed_ray.keys["doomed"], replica)
        assert refused.status_code == 401 and "has been revoked" in refused.json()["error"]["message"]
    assert revoked.headers[REPLICAS_HEADER.decode()] == ",".join(replicas)


def test_a_reload_is_seen_by_every_replica_by_the_admin_call_and_as_sighup_has_it(keyed_ray):
    replicas = sorted(keyed_ray.prompts)
    newcomer = keyed_ray.add_tenant("newcomer")
    assert [keyed_ray.complete(newcomer, replica).status_code for replica in replicas] == [401, 401]
    reloaded = keyed_ray.admin("/admin/reload")
    assert reloaded.status_code == 200
    assert [keyed_ray.complete(newcomer, replica).status_code for replica in replicas] == [200, 200]
    assert reloaded.headers[REPLICAS_HEADER.decode()] == ",".join(replicas)

    latecomer = keyed_ray.add_tenant("latecomer")
    reload_every_replica()  # what `autoglm serve --ray` does on SIGHUP
    assert [keyed_ray.complete(latecomer, replica).status_code for replica in replicas] == [200, 200]


def test_a_tenants_rate_limit_is_one_budget_across_the_replicas(keyed_ray):
    first, second = sorted(keyed_ray.prompts)
    key = keyed_ray.keys["limited"]
    answers = [keyed_ray.complete(key, replica) for replica in (first, second) * (REQUESTS_PER_DAY // 2)]
    assert [answer.status_code for answer in answers] == [200] * REQUESTS_PER_DAY
    assert [int(answer.headers["x-ratelimit-remaining-requests"]) for answer in answers] == [3, 2, 1, 0]
    for replica in (first, second):  # each served half the budget, and refuses
        refused = keyed_ray.complete(key, replica)
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "requests"


def test_promote_and_rollback_reach_every_replica(keyed_ray):
    replicas = sorted(keyed_ray.prompts)

    def served_versions() -> list[str]:
        return [keyed_ray.complete(keyed_ray.keys["admin"], replica).json()["model"] for replica in replicas]

    assert served_versions() == [f"{MODEL}@1"] * NUM_REPLICAS
    promoted = keyed_ray.admin(f"/admin/models/{MODEL}/promote", version="2")
    assert promoted.status_code == 200, promoted.text
    assert served_versions() == [f"{MODEL}@2"] * NUM_REPLICAS
    assert promoted.headers[REPLICAS_HEADER.decode()] == ",".join(replicas)
    assert keyed_ray.admin(f"/admin/models/{MODEL}/rollback").status_code == 200
    assert served_versions() == [f"{MODEL}@1"] * NUM_REPLICAS


def test_a_canary_one_replica_rolls_back_automatically_ends_on_every_replica(keyed_ray):
    first, second = sorted(keyed_ray.prompts)
    split = keyed_ray.admin(f"/admin/models/{MODEL}/canary", version="2", percent=100)
    assert split.status_code == 200, split.text
    assert keyed_ray.canaries() == [{"version": "2", "percent": 100.0}] * NUM_REPLICAS
    served = [keyed_ray.complete(keyed_ray.keys["admin"], first).json()["model"] for _ in range(CANARY_REQUESTS)]
    assert served == [f"{MODEL}@2"] * CANARY_REQUESTS  # too slow for the threshold: rolled back on `first`
    # `second` took no canary request, so only `first` telling it ends the canary there.
    assert wait_until(lambda: keyed_ray.canaries() == [None] * NUM_REPLICAS)
    assert keyed_ray.complete(keyed_ray.keys["admin"], second).json()["model"] == f"{MODEL}@1"
