"""The tenants file ``bench tenants`` serves with: tenants A and B, a key each, limits set but never reached.

The limits are far above what the benchmark sends, so every request pays for checking them
and none is refused: the overhead measured is the checking, not the refusing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoglm.server.tenants.file import StoredKey, Tenant, TenantLimits, TenantsFile, save_tenants_file, utc_now
from autoglm.server.tenants.keys import generate_key, hash_key

FLOODER, VICTIM = "A", "B"
UNREACHED_LIMITS = TenantLimits(requests_per_minute=10**7, tokens_per_minute=10**10, max_concurrent_requests=10**5,
                                max_tokens_cap=10**6, tokens_per_day=10**13)


@dataclass(frozen=True)
class BenchTenants:
    path: Path
    keys: dict[str, str]  # tenant id -> its key, known only to this process
    weights: dict[str, float]


def write_bench_tenants(path: Path, weights: dict[str, float]) -> BenchTenants:
    """A tenants file at ``path`` with one user tenant per weight and a fresh key for each."""
    keys = {tenant: generate_key() for tenant in weights}
    now = utc_now()
    tenants = TenantsFile(
        tenants=tuple(Tenant(id=tenant, weight=weight, limits=UNREACHED_LIMITS) for tenant, weight in weights.items()),
        keys=tuple(StoredKey(id=f"bench-{tenant}", tenant=tenant, hash=hash_key(key), created=now)
                   for tenant, key in keys.items()),
    )
    path.touch(mode=0o600)
    save_tenants_file(path, tenants)
    return BenchTenants(path, keys, weights)
