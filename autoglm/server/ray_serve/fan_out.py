"""Admin calls that change what a replica serves go to every engine replica, and answer once each has.

A revoke, a reload of the tenants file, or a model version loaded, unloaded, promoted, rolled back or
split off as a canary changes one replica's own state: sent to one replica, the others would keep
serving the revoked key or the old version. The ingress sends such a call to every running replica
(Ray Serve's broadcast) and waits for each answer. Where every replica answers alike, that answer
is relayed, naming the replicas that gave it; where one fails or answers otherwise, the call is a
503 naming each replica's outcome, so the admin knows which ones to call again.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus

from starlette.responses import Response

from autoglm.server.openai.errors import APIError

# Names every replica that applied a fanned-out admin call.
REPLICAS_HEADER = b"x-autoglm-replicas"
_FANNED_OUT_PATHS = re.compile(r"/admin/(reload|keys/[^/]+/revoke|models/[^/]+/(load|unload|promote|rollback|canary))")


def fans_out(method: str, path: str) -> bool:
    """Whether a request changes a replica's keys, tenants or served versions (so every replica needs it)."""
    return method == "POST" and _FANNED_OUT_PATHS.fullmatch(path) is not None


@dataclass(frozen=True)
class ReplicaAnswer:
    """One replica's whole answer to a request."""

    replica: str
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


def combined_answer(method: str, path: str, outcomes: Sequence[ReplicaAnswer | BaseException]) -> Response:
    """The replicas' common answer, or a 503 naming what each replica did when they differ or one failed."""
    answers = [outcome for outcome in outcomes if isinstance(outcome, ReplicaAnswer)]
    if answers and len(answers) == len(outcomes) and len({answer.status for answer in answers}) == 1:
        first = answers[0]
        response = Response(first.body, first.status)
        replicas = ",".join(sorted(answer.replica for answer in answers)).encode()
        response.raw_headers = [*first.headers, (REPLICAS_HEADER, replicas)]
        return response
    told = "; ".join(_outcome(outcome) for outcome in outcomes)
    return APIError(HTTPStatus.SERVICE_UNAVAILABLE,
                    f"{method} {path} did not succeed alike on every engine replica ({told}); the replicas that "
                    "applied it keep it: check GET /admin/tenants or /admin/models and retry the call",
                    code="replicas_disagree").to_response()


def _outcome(outcome: ReplicaAnswer | BaseException) -> str:
    if isinstance(outcome, ReplicaAnswer):
        return f"replica {outcome.replica} answered {outcome.status}"
    return f"a replica failed: {type(outcome).__name__}: {outcome}"
