"""Ray Serve's request router for the engine replicas: a prompt's replica by its prefix, unless that one is busy.

It runs where requests are sent from (the ingress replicas), on every request Ray routes to an
engine. A request sent with a `routing_key` (its prompt's leading characters) goes to the replica
the key hashes to on a consistent-hash ring of the running replicas, where earlier requests with
that prefix left their KV blocks, while that replica holds fewer than `busy_requests` ongoing
requests; then, and for requests without a key, to the least-loaded replica. Replicas joining or
leaving move only the keys they take or held.
"""
from __future__ import annotations

from ray.serve.request_router import FIFOMixin, PendingRequest, RequestRouter, RunningReplica

from autoglm.server.ray_serve.hash_ring import HashRing

ROUTING_KEY_ARGUMENT = "routing_key"


class PrefixAffinityRouter(FIFOMixin, RequestRouter):
    """Consistent hashing over prompt prefixes, falling back to the least-loaded replica."""

    def initialize_state(self, busy_requests: float = float("inf")) -> None:
        self._busy_requests = busy_requests
        self._ring = HashRing.of(())

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        """The key's replica first if it has room, then every replica, least-loaded first (Ray probes and picks
        the shortest queue among a rank)."""
        if pending_request is None:
            return [candidate_replicas]
        pending_request.routing_context.should_backoff = True  # back off when no rank takes it, not spin
        key = pending_request.kwargs.get(ROUTING_KEY_ARGUMENT)
        preferred = self._replica_for(key, candidate_replicas) if key else None
        if preferred is None or self._is_busy(preferred):
            return [candidate_replicas]
        return [[preferred], [replica for replica in candidate_replicas if replica is not preferred]]

    def _replica_for(self, key: str, candidates: list[RunningReplica]) -> RunningReplica | None:
        by_id = {replica.replica_id.unique_id: replica for replica in candidates}
        if not by_id:
            return None
        if self._ring.members != by_id.keys():
            self._ring = HashRing.of(by_id)
        return by_id[self._ring.owner(key)]

    def _is_busy(self, replica: RunningReplica) -> bool:
        """As the last queue length heard from it says; unknown counts as not busy (Ray probes it anyway)."""
        ongoing = self.replica_queue_len_cache.get(replica.replica_id)
        return ongoing is not None and ongoing >= self._busy_requests
