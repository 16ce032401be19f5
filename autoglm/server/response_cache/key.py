"""The response cache's key: everything that fixes a deterministic request's answer, and nothing else."""
from __future__ import annotations

import hashlib
import json

from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.protocol import GenerationRequest

# Request fields that never change what the model writes: how the answer is delivered, who asked (the
# tenant is keyed instead), scheduling, and chat fields accepted and not used. `model` gives way to the
# exact version that serves the request, so "NAME" and "NAME@stable" share entries and two versions never do.
IGNORED_FIELDS = frozenset({"model", "stream", "stream_options", "user", "priority", "metadata",
                            "safety_identifier", "prompt_cache_key"})
# Changed whenever the stored form of an answer changes, so that no entry of another form is ever read.
KEY_FORMAT = "v1"


def is_deterministic(params: SamplingParams) -> bool:
    """Greedy decoding, or sampling from a fixed seed: the same request always gets the same answer."""
    return params.greedy or params.seed is not None


def response_cache_key(version_id: str, answer_source: str, tenant_scope: str | None, route: str,
                       body: GenerationRequest, image_hashes: tuple[bytes, ...] = ()) -> str:
    """A SHA-256 of the canonical JSON of the version, what produces its answers (`answer_source`, a digest
    of its weights, files and numerics), whose answers these are (`tenant_scope`: a tenant, or the tenants
    sharing a cache_salt), the route, the request's fields (after the server's own changes to them, such
    as a tenant's max_tokens cap) and its images by content (the dump keeps each image part's place, not its
    URL: the same screenshot sent again hits, wherever it comes from, and another one misses)."""
    identity = {
        "version": version_id,
        "source": answer_source,
        "tenant": tenant_scope,
        "route": route,
        "request": body.model_dump(mode="json", exclude=set(IGNORED_FIELDS)),
        "images": [image_hash.hex() for image_hash in image_hashes],
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{KEY_FORMAT}:{hashlib.sha256(canonical.encode()).hexdigest()}"
