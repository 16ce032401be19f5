"""One local Ray cluster, with Serve's HTTP proxy, for every test here that needs one: starting it takes half a
minute on a small machine. Each module deploys its own application on it and deletes it when done."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray
from ray import serve

from tests.server.live_server import free_port

# The engine replicas of one application at a time, a CPU each.
RAY_CPUS = 2
# Serve kills an HTTP proxy that is not ready within 5 s, or misses a 10 s health check: on a machine busy
# with other tests its start alone can take longer. Ray also starts its workers at niceness 15, where on a
# machine busy with other work the replicas get a few percent of a core and take many minutes to load
# their engines. The cluster's processes inherit these from here.
PATIENT_SERVE = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "120", "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60",
                 "RAY_worker_niceness": "0"}


@pytest.fixture(scope="package")
def ray_proxy_url() -> Iterator[str]:
    """The proxy's address; the cluster stops after the last test of this folder."""
    with pytest.MonkeyPatch.context() as environment:
        for name, value in PATIENT_SERVE.items():
            environment.setenv(name, value)
        ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield f"http://127.0.0.1:{port}"
        serve.shutdown()
        ray.shutdown()
