"""The engine deployment's request router: a prompt's replica by its key, the least-loaded when that one is busy."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID, RequestMetadata
from ray.serve.request_router import PendingRequest

from autoglm.server.ray_serve.hash_ring import HashRing
from autoglm.server.ray_serve.request_router import PrefixAffinityRouter

ENGINES = DeploymentID(name="engine", app_name="app")
BUSY = 4


@dataclass
class Replica:
    """What the router reads of Ray's RunningReplica."""

    replica_id: ReplicaID


def replicas(*tags: str) -> list[Replica]:
    return [Replica(ReplicaID(tag, ENGINES)) for tag in tags]


def pending(key: str | None) -> PendingRequest:
    return PendingRequest(args=[], kwargs={"routing_key": key}, metadata=RequestMetadata("id", "id"))


@pytest.fixture
def router():
    """A router on an event loop of its own, as Ray builds one on the loop that sends the requests."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    router = PrefixAffinityRouter(deployment_id=ENGINES, handle_source=DeploymentHandleSource.UNKNOWN)
    router.initialize_state(busy_requests=BUSY)
    yield router
    asyncio.set_event_loop(None)
    loop.close()


def choose(router: PrefixAffinityRouter, candidates: list[Replica], request: PendingRequest) -> list[list[str]]:
    ranks = asyncio.get_event_loop().run_until_complete(router.choose_replicas(candidates, request))
    return [[replica.replica_id.unique_id for replica in rank] for rank in ranks]


def test_a_keyed_request_goes_to_its_keys_replica_first_then_to_the_others(router):
    candidates = replicas("a", "b", "c")
    request = pending("ROMEO: But, soft!")
    owner = HashRing.of(["a", "b", "c"]).owner("ROMEO: But, soft!")
    assert choose(router, candidates, request) == [[owner], [tag for tag in "abc" if tag != owner]]
    assert request.routing_context.should_backoff  # no rank took it: wait before trying again, do not spin


def test_a_busy_replica_is_passed_over_for_the_least_loaded(router):
    candidates = replicas("a", "b", "c")
    owner = HashRing.of(["a", "b", "c"]).owner("key")
    router.replica_queue_len_cache.update(ReplicaID(owner, ENGINES), BUSY - 1)
    assert choose(router, candidates, pending("key"))[0] == [owner]
    router.replica_queue_len_cache.update(ReplicaID(owner, ENGINES), BUSY)
    assert choose(router, candidates, pending("key")) == [["a", "b", "c"]]


def test_requests_without_a_key_go_to_the_least_loaded(router):
    assert choose(router, replicas("a", "b"), pending(None)) == [["a", "b"]]


def test_keys_follow_the_running_replicas(router):
    keys = [f"prompt {index}" for index in range(50)]
    before = {key: choose(router, replicas("a", "b", "c"), pending(key))[0][0] for key in keys}
    after = {key: choose(router, replicas("a", "b"), pending(key))[0][0] for key in keys}
    assert set(after.values()) == {"a", "b"}
    assert all(after[key] == before[key] for key in keys if before[key] != "c")
