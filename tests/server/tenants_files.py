"""Tenants files for the tests, with keys made the way `autoglm keys create` makes them."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from autoglm.server.tenants.keys import generate_key, hash_key


@dataclass
class TenantsFixture:
    """A tenants file being written, and the keys it holds by name."""

    tenants: list[dict[str, object]]
    keys: dict[str, str] = field(default_factory=dict)
    stored: list[dict[str, object]] = field(default_factory=list)

    def add_key(self, name: str, tenant: str, **fields: object) -> str:
        key = generate_key()
        self.keys[name] = key
        self.stored.append({"id": name, "tenant": tenant, "hash": hash_key(key),
                            "created": datetime.now(timezone.utc).isoformat(), **fields})
        return key

    def write(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({"tenants": self.tenants, "keys": self.stored}))
        return path


def an_hour_ago() -> str:
    return (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
