"""Tenants files for the tests, with keys made the way `autoglm keys create` makes them."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from autoglm.server.tenants.keys import generate_key, hash_key
from tests.server.live_server import RunningServer, start_server


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


def serve_tenants(model: Path, tenants: TenantsFixture, folder: Path, **settings: object) -> RunningServer:
    """A live server of `model` keyed by `tenants`, its file written into `folder`."""
    return start_server(model, tenants_file=str(tenants.write(folder / "tenants.yaml")), **settings)


def an_hour_ago() -> str:
    return (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
