"""The keys a server accepts, and who each one speaks for."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from pathlib import Path

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.server.errors import APIError
from autoglm.server.tenants.file import (ANY_MODEL, Role, StoredKey, Tenant, TenantsFile,
                                         load_tenants_file, utc_now)
from autoglm.server.tenants.keys import hash_key, hashes_match

# The tenant the one `api_key` setting speaks for.
API_KEY_TENANT = "default"


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for: the tenant, and the role its key grants."""

    tenant: Tenant
    role: Role


def invalid_key(message: str) -> APIError:
    return APIError(HTTPStatus.UNAUTHORIZED, message, code="invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"})


class KeyRing:
    """Finds the stored key a presented one hashes to, comparing against every stored hash so
    the time taken says nothing about which key, if any, came close."""

    def __init__(self, tenants: TenantsFile) -> None:
        self.tenants = tenants

    def authenticate(self, presented: str, now: datetime | None = None) -> Principal:
        """The principal `presented` speaks for; a 401 APIError for an unknown, revoked or expired key."""
        presented_hash = hash_key(presented)
        found: StoredKey | None = None
        for key in self.tenants.keys:
            if hashes_match(presented_hash, key.hash):
                found = key
        if found is None:
            raise invalid_key("Incorrect API key provided; send a key made by 'autoglm keys create' as "
                              "'Authorization: Bearer KEY'.")
        if found.revoked:
            raise invalid_key(f"The API key '{found.id}' has been revoked.")
        if found.expired(now or utc_now()):
            raise invalid_key(f"The API key '{found.id}' expired at {found.expires:%Y-%m-%d %H:%M UTC}.")
        tenant = self.tenants.tenant(found.tenant)
        assert tenant is not None, "validation makes every key's tenant exist"
        return Principal(tenant, self.tenants.key_role(found))


def keyring_from_config(config: AutoGLMConfig) -> KeyRing | None:
    """The keys `config` asks for: those of tenants_file, or the one api_key; None when neither is set."""
    if config.tenants_file is not None and config.api_key is not None:
        raise ConfigError("tenants_file and api_key are both set; set one (add the key to the tenants file "
                          "with 'autoglm keys create' instead)")
    if config.tenants_file is not None:
        return KeyRing(load_tenants_file(Path(config.tenants_file)))
    if config.api_key is not None:
        tenant = Tenant(id=API_KEY_TENANT, role=Role.ADMIN, models=(ANY_MODEL,))
        key = StoredKey(id="api_key", tenant=API_KEY_TENANT, hash=hash_key(config.api_key),
                        created=utc_now())
        return KeyRing(TenantsFile(tenants=(tenant,), keys=(key,)))
    return None
