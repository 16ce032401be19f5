"""The tenants file: each tenant's role, models, limits and scheduling weight, and the hashes of its keys.

Validated as strictly as the settings: an unknown field or a bad value is an error naming the
file, the tenant or key it sits in, the field, and what is allowed.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from autoglm.atomic_write import write_text_atomically
from autoglm.config import ConfigError
from autoglm.errors import quote_value
from autoglm.server.tenants.file_edits import text_with_key, text_with_key_revoked

# A tenant may use every model the server serves.
ANY_MODEL = "*"
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class TenantsFileError(ConfigError):
    """A tenants file that cannot be read or holds a bad entry."""


class Role(str, Enum):
    """What a key may do, each role able to do all the one below it can."""

    READER = "reader"  # list models, tokenize; no generation
    USER = "user"  # inference routes
    ADMIN = "admin"  # every route

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    @property
    def may_generate(self) -> bool:
        return self.rank >= Role.USER.rank


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TenantLimits(_Strict):
    """A tenant's budget; None is unlimited."""

    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    max_concurrent_requests: int | None = Field(None, ge=1)
    max_tokens_cap: int | None = Field(None, ge=1)
    tokens_per_day: int | None = Field(None, ge=1)
    requests_per_day: int | None = Field(None, ge=1)


class Tenant(_Strict):
    id: str = Field(pattern=_NAME_PATTERN)
    role: Role = Role.USER
    models: tuple[str, ...] = Field((ANY_MODEL,), min_length=1)
    limits: TenantLimits = TenantLimits()
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    cache_salt: str | None = Field(None, min_length=1,
                                   description="Its prefix cache: tenants with the same value share cached "
                                               "prompt prefixes (a team's common system prompt); others never "
                                               "see them. None: a cache of its own, which no salt shares.")

    def may_use(self, model: str) -> bool:
        return ANY_MODEL in self.models or model in self.models


class StoredKey(_Strict):
    """A key as the file holds it: its hash, never the key itself."""

    id: str = Field(pattern=_NAME_PATTERN)
    tenant: str
    hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    role: Role | None = None  # None: the tenant's role
    created: datetime
    expires: datetime | None = None
    revoked: bool = False

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and now >= self.expires


class TenantsFile(_Strict):
    tenants: tuple[Tenant, ...]
    keys: tuple[StoredKey, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> TenantsFile:
        if not self.tenants:
            raise ValueError("the file names no tenants; add one under 'tenants:' with at least an id")
        _check_unique("tenant", [tenant.id for tenant in self.tenants])
        _check_unique("key", [key.id for key in self.keys])
        tenants = {tenant.id: tenant for tenant in self.tenants}
        for key in self.keys:
            tenant = tenants.get(key.tenant)
            if tenant is None:
                raise ValueError(f"key '{key.id}': tenant {quote_value(key.tenant)} is not in the file; "
                                 f"tenants: {', '.join(tenants)}")
            if key.role is not None and key.role.rank > tenant.role.rank:
                raise ValueError(f"key '{key.id}': role '{key.role.value}' is above the role "
                                 f"'{tenant.role.value}' of its tenant '{tenant.id}'; a key may only narrow it")
        return self

    def tenant(self, tenant_id: str) -> Tenant | None:
        return next((tenant for tenant in self.tenants if tenant.id == tenant_id), None)

    def key(self, key_id: str) -> StoredKey | None:
        return next((key for key in self.keys if key.id == key_id), None)

    def with_key_revoked(self, key_id: str) -> TenantsFile:
        """This file with the key `key_id` marked revoked; it stays listed."""
        keys = tuple(key.model_copy(update={"revoked": True}) if key.id == key_id else key for key in self.keys)
        return self.model_copy(update={"keys": keys})

    def key_role(self, key: StoredKey) -> Role:
        tenant = self.tenant(key.tenant)
        assert tenant is not None, "validation makes every key's tenant exist"
        return key.role or tenant.role

    def with_key(self, key: StoredKey, path: Path) -> TenantsFile:
        """This file with `key` added, validated as a whole (a role above its tenant's is refused)."""
        data = self.model_dump()
        return _validated({**data, "keys": [*data["keys"], key.model_dump()]}, path)


def _check_unique(kind: str, ids: list[str]) -> None:
    repeated = sorted({name for name in ids if ids.count(name) > 1})
    if repeated:
        raise ValueError(f"{kind} id {', '.join(map(quote_value, repeated))} appears more than once")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def load_tenants_file(path: Path) -> TenantsFile:
    """The validated tenants file at `path`; a TenantsFileError naming what is wrong otherwise."""
    return _parsed(_read(path), path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TenantsFileError(f"tenants file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TenantsFileError(f"cannot read tenants file {path}: {error}") from None


def _parsed(text: str, path: Path) -> TenantsFile:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TenantsFileError(f"malformed tenants file {path}: {error}") from None
    if not isinstance(data, dict):
        raise TenantsFileError(f"tenants file {path} must hold a mapping with 'tenants' (and 'keys') at the top "
                               f"level, not {type(data).__name__}")
    return _validated(data, path)


def _validated(data: dict[str, Any], path: Path) -> TenantsFile:
    try:
        return TenantsFile.model_validate(data)
    except ValidationError as error:
        lines = [_explain(problem, data) for problem in error.errors()]
        raise TenantsFileError(f"invalid tenants file {path}:\n  " + "\n  ".join(lines)) from None


def create_tenants_file(path: Path, tenant_id: str, role: Role) -> None:
    """A new tenants file at `path` naming one tenant, readable and writable by its owner only (it lists who may
    use the server); a TenantsFileError if the file exists."""
    data = {"tenants": [{"id": tenant_id, "role": role.value, "models": [ANY_MODEL]}]}
    _validated(data, path)
    text = (f"# Tenants and the hashes of their keys, for `autoglm serve --tenants-file {path.name}`;\n"
            f"# docs/TENANTS.md lists every field. `autoglm keys` adds and revokes keys.\n"
            + yaml.safe_dump(data, sort_keys=False))
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise TenantsFileError(f"tenants file {path} already exists") from None
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)


def add_key_to_file(path: Path, key: StoredKey) -> TenantsFile:
    """The tenants file at `path` with `key` added, written; refused before anything is written if the key does
    not fit the file (a role above its tenant's)."""
    text = _read(path)
    updated = _parsed(text, path).with_key(key, path)
    _write_edit(path, lambda: text_with_key(text, key.model_dump(mode="json", exclude_defaults=True)), updated)
    return updated


def revoke_key_in_file(path: Path, key_id: str) -> TenantsFile:
    """The tenants file at `path` with the key `key_id` marked revoked, written; KeyError if it has no such key."""
    text = _read(path)
    tenants = _parsed(text, path)
    if tenants.key(key_id) is None:
        raise KeyError(key_id)
    updated = tenants.with_key_revoked(key_id)
    _write_edit(path, lambda: text_with_key_revoked(text, key_id), updated)
    return updated


def _write_edit(path: Path, edit: Callable[[], str], updated: TenantsFile) -> None:
    """Write the user's text changed by `edit`, in one step so a reader never sees half a file; when the edited
    text would not read back as `updated` (a layout the edit does not know), the file written anew instead,
    without its comments."""
    try:
        edited = edit()
        kept = _parsed(edited, path) == updated
    except (TenantsFileError, yaml.YAMLError, ValueError):
        kept = False
    if not kept:
        edited = yaml.safe_dump(updated.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
    write_text_atomically(path, edited)  # whoever could read the file before still can


def _explain(problem: ErrorDetails, data: dict[str, Any]) -> str:
    """'tenant 'team-a': limits.requests_per_minute: ...': the entry named by its id, then the field."""
    loc = problem["loc"]
    message = str(problem["ctx"]["error"]) if problem["type"] == "value_error" else problem["msg"]
    if len(loc) >= 2 and loc[0] in ("tenants", "keys") and isinstance(loc[1], int):
        entry = _entry_name(loc[0], loc[1], data)
        field = ".".join(str(part) for part in loc[2:])
        where = f"{entry}: {field}" if field else entry
    else:
        where = ".".join(str(part) for part in loc)
    got = "" if problem["type"] in ("missing", "value_error") else f" (got {quote_value(problem['input'])})"
    return f"{where}: {message}{got}" if where else f"{message}{got}"


def _entry_name(section: str, index: int, data: dict[str, Any]) -> str:
    kind = "tenant" if section == "tenants" else "key"
    entries = data.get(section)
    entry = entries[index] if isinstance(entries, list) and index < len(entries) else None
    name = entry.get("id") if isinstance(entry, dict) else None
    return f"{kind} {quote_value(name)}" if isinstance(name, str) else f"{kind} #{index + 1}"
