"""The tenants file ``bench tenants`` serves with: tenants A and B, a key each, limits set but never reached.

The limits are far above what the benchmark sends, so every request pays for checking them
and none is refused: the overhead measured is the checking, not the refusing. The keys are
made by ``autoglm keys create``, as an operator makes them, so the bench stays out of the
server's code.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

FLOODER, VICTIM = "A", "B"
UNREACHED_LIMITS = {"requests_per_minute": 10**7, "tokens_per_minute": 10**10, "max_concurrent_requests": 10**5,
                    "max_tokens_cap": 10**6, "tokens_per_day": 10**13, "requests_per_day": 10**10}


@dataclass(frozen=True)
class BenchTenants:
    path: Path
    keys: dict[str, str]  # tenant id -> its key, known only to this process
    weights: dict[str, float]


def write_bench_tenants(path: Path, weights: dict[str, float]) -> BenchTenants:
    """A tenants file at ``path`` with one user tenant per weight and a fresh key for each."""
    tenants = [{"id": tenant, "weight": weight, "limits": UNREACHED_LIMITS} for tenant, weight in weights.items()]
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump({"tenants": tenants}, sort_keys=False))
    keys = {tenant: _create_key(path, tenant) for tenant in weights}
    return BenchTenants(path, keys, weights)


def _create_key(path: Path, tenant: str) -> str:
    """A new key of `tenant`, added to the file by the keys command (which prints the key alone on its first line)."""
    command = [sys.executable, "-m", "autoglm", "keys", "create", "--tenant", tenant, "--file", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[0].strip()
