"""The keys a server accepts, and who each one speaks for."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from pathlib import Path

from autoglm.config import ConfigError, ServerConfig
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.file import (ANY_MODEL, Role, StoredKey, Tenant, TenantsFile,
                                         TenantsFileError, load_tenants_file, revoke_key_in_file, utc_now)
from autoglm.server.tenants.keys import hash_key, hashes_match
from autoglm.server.tenants.unserved_models import warn_of_unserved_models
from autoglm.server.versions.served_names import served_model_names

# The tenant the one `api_key` setting speaks for.
API_KEY_TENANT = "default"


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for: the tenant, the role its key grants, and the key's id (never the key itself)."""

    tenant: Tenant
    role: Role
    key_id: str


def invalid_key(message: str) -> APIError:
    return APIError(HTTPStatus.UNAUTHORIZED, message, code="invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"})


class KeyRing:
    """Finds the stored key a presented one hashes to, comparing against every stored hash so
    the time taken says nothing about which key, if any, came close.

    With a tenants file, its content can be read again while the server runs: the new tenants
    replace the old in one assignment, so each request sees one file or the other, and requests
    already let in keep the principal they were given.
    """

    def __init__(self, tenants: TenantsFile, path: Path | None = None, served_models: tuple[str, ...] = ()) -> None:
        self.tenants = tenants
        self.path = path  # None: the keys come from the api_key setting, not a file
        self.served_models = served_models  # to warn of a tenant allowed none of them, at load and reload
        self._file_turn = threading.Lock()  # one read-modify-write of the file at a time
        if path is not None:
            warn_of_unserved_models(tenants, served_models)

    def has_tenant(self, tenant_id: str) -> bool:
        return self.tenants.tenant(tenant_id) is not None

    def reload(self) -> TenantsFile:
        """Serve the keys of the tenants file as it is now; a bad file raises TenantsFileError and the
        keys served stay as they were."""
        path = self._file_path()
        with self._file_turn:
            tenants = self.tenants = load_tenants_file(path)
        warn_of_unserved_models(tenants, self.served_models)
        return tenants

    def revoke(self, key_id: str) -> StoredKey:
        """Mark the key revoked in the tenants file and serve the file so changed; KeyError if no such key."""
        path = self._file_path()
        with self._file_turn:
            updated = revoke_key_in_file(path, key_id)  # as it is on disk, with any edit made since it was read
            self.tenants = updated
        revoked = updated.key(key_id)
        assert revoked is not None
        return revoked

    def _file_path(self) -> Path:
        if self.path is None:
            raise TenantsFileError("the server's one key comes from the api_key setting, not a tenants file; "
                                   "there is no file to read again or change (set tenants_file instead)")
        return self.path

    def authenticate(self, presented: str, now: datetime | None = None) -> Principal:
        """The principal `presented` speaks for; a 401 APIError for an unknown, revoked or expired key."""
        tenants = self.tenants  # one file throughout, even if a reload replaces it meanwhile
        presented_hash = hash_key(presented)
        found: StoredKey | None = None
        for key in tenants.keys:
            if hashes_match(presented_hash, key.hash):
                found = key
        if found is None:
            raise invalid_key("Incorrect API key provided; send a key made by 'autoglm keys create' as "
                              "'Authorization: Bearer KEY' or 'x-api-key: KEY'.")
        return _principal_of(tenants, found, now)

    def principal_of_key(self, key_id: str, now: datetime | None = None) -> Principal:
        """The principal the stored key `key_id` speaks for now, as if it were presented again: work a key
        started that runs later (a batch's lines) is checked as it runs; a 401 APIError once the key is gone
        from the file, revoked or expired."""
        tenants = self.tenants
        found = tenants.key(key_id)
        if found is None:
            raise invalid_key(f"The API key '{key_id}' is no longer in the tenants file.")
        return _principal_of(tenants, found, now)


def _principal_of(tenants: TenantsFile, found: StoredKey, now: datetime | None) -> Principal:
    """Who `found` speaks for; a 401 APIError if it is revoked or expired."""
    if found.revoked:
        raise invalid_key(f"The API key '{found.id}' has been revoked.")
    if found.expired(now or utc_now()):
        raise invalid_key(f"The API key '{found.id}' expired at {found.expires:%Y-%m-%d %H:%M UTC}.")
    tenant = tenants.tenant(found.tenant)
    assert tenant is not None, "validation makes every key's tenant exist"
    return Principal(tenant, tenants.key_role(found), found.id)


def keyring_from_config(config: ServerConfig) -> KeyRing | None:
    """The keys `config` asks for: those of tenants_file, or the one api_key; None when neither is set
    (a ConfigError if a setting needs keys)."""
    if config.tenants.tenants_file is not None and config.tenants.api_key is not None:
        raise ConfigError("tenants_file and api_key are both set; set one (add the key to the tenants file "
                          "with 'autoglm keys create' instead)")
    if config.tenants.tenants_file is not None:
        path = Path(config.tenants.tenants_file)
        return KeyRing(load_tenants_file(path), path, served_model_names(config))
    if config.tenants.api_key is not None:
        tenant = Tenant(id=API_KEY_TENANT, role=Role.ADMIN, models=(ANY_MODEL,))
        key = StoredKey(id="api_key", tenant=API_KEY_TENANT, hash=hash_key(config.tenants.api_key),
                        created=utc_now())
        return KeyRing(TenantsFile(tenants=(tenant,), keys=(key,)))
    if config.tenants.metrics_require_key:
        raise ConfigError("metrics_require_key needs keys to check: set tenants_file or api_key too")
    return None
