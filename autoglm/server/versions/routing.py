"""Which loaded version serves a request: its `model` field names a model (its stable, or the canary for the
canary's share), an alias, or a version."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from autoglm.errors import quote_value
from autoglm.registry.base import CANARY_ALIAS, STABLE_ALIAS
from autoglm.server.openai.errors import APIError
from autoglm.server.versions.canary import CanarySplit
from autoglm.server.versions.pool import VersionPool
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.versions.version_ids import VERSION_SEPARATOR, version_id

# Whether the key's tenant may use a model name; a server without keys allows every one.
ModelFilter = Callable[[str], bool]


def any_model(_: str) -> bool:
    return True


def model_name_of(reference: str) -> str:
    """The model a reference names: NAME of NAME, NAME@ALIAS or NAME@VERSION (what tenants are allowed)."""
    return reference.partition(VERSION_SEPARATOR)[0]


@dataclass
class ModelRoutes:
    """One model's routing: its stable version, those before it (rollback goes back one), its canary split,
    the registry's other aliases as last read, and versions loaded on request as warm standby (`pinned`)."""

    name: str
    stable: str
    previous_stables: list[str] = field(default_factory=list)  # oldest first
    canary: CanarySplit | None = None
    registry_aliases: dict[str, str] = field(default_factory=dict)
    pinned: set[str] = field(default_factory=set)

    def target(self, after_separator: str, routing_key: str) -> str:
        """The version for what follows NAME@ in a reference (nothing for a bare NAME)."""
        if not after_separator:
            return self.canary.version if self.canary is not None and self.canary.takes(routing_key) else self.stable
        return self.aliases().get(after_separator, after_separator)

    def aliases(self) -> dict[str, str]:
        """Alias -> version, the server's own stable and canary over the registry's."""
        table = {**self.registry_aliases, STABLE_ALIAS: self.stable}
        if self.canary is not None:
            table[CANARY_ALIAS] = self.canary.version
        else:
            table.pop(CANARY_ALIAS, None)
        return table

    def aliases_of(self, version: str) -> list[str]:
        return sorted(alias for alias, target in self.aliases().items() if target == version)

    def kept_loaded(self) -> set[str]:
        """Versions to keep loaded: stable, canary, the previous stable (warm, so rollback is instant), pinned."""
        kept = {self.stable, *self.pinned}
        if self.previous_stables:
            kept.add(self.previous_stables[-1])
        if self.canary is not None:
            kept.add(self.canary.version)
        return kept


class ModelRouter:
    """The routes of every served model; requests without a `model` go to `default_name`."""

    def __init__(self, pool: VersionPool, default_name: str) -> None:
        self.pool = pool
        self.default_name = default_name
        self.routes: dict[str, ModelRoutes] = {}

    def route(self, requested_model: str | None, routing_key: str) -> ServedVersion:
        """The loaded version that serves a request for `requested_model`; an APIError (404, 503) if none."""
        name, _, after = (requested_model or self.default_name).partition(VERSION_SEPARATOR)
        routes = self.routes.get(name)
        if routes is None:
            raise self.unknown_model(requested_model, any_model)
        served_id = version_id(name, routes.target(after, routing_key))
        version = self.pool.get(served_id)
        if version is None:
            raise APIError(HTTPStatus.NOT_FOUND, f"The model version {quote_value(requested_model)} is not loaded; "
                           f"{name} serves: {self.describe(routes)}.", param="model", code="model_not_found")
        if not version.engine.is_running:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, f"the engine loop of {version.version_id} has stopped; "
                           "the server must be restarted", code="engine_not_running")
        return version

    def stable_of(self, name: str) -> ServedVersion | None:
        """The model's stable, once loaded and taking requests."""
        routes = self.routes.get(name)
        return self.pool.get(version_id(routes.name, routes.stable)) if routes is not None else None

    def default_for(self, may_use: ModelFilter) -> str | None:
        """The model of a request that names none: the default, else the first served model the key's tenant
        may use; None if it may use none."""
        if may_use(self.default_name):
            return self.default_name
        return next((name for name in self.routes if may_use(name)), None)

    def check_served(self, requested_model: str, may_use: ModelFilter) -> None:
        """Refuse with 404 a model this server does not serve."""
        if model_name_of(requested_model) not in self.routes:
            raise self.unknown_model(requested_model, may_use)

    def unknown_model(self, requested_model: str | None, may_use: ModelFilter) -> APIError:
        """The 404 of a model not served, naming only the served models the key's tenant may use."""
        served = ", ".join(f"'{known}'" for known in self.routes if may_use(known))
        listed = f"this server serves {served}" if served else "this server serves no model this key may use"
        return APIError(HTTPStatus.NOT_FOUND, f"The model {quote_value(requested_model)} does not exist; {listed}.",
                        param="model", code="model_not_found")

    def describe(self, routes: ModelRoutes) -> str:
        """The model's loaded versions with their aliases, e.g. 'm@1 (stable), m@2 (canary)'."""
        entries = []
        for served in self.loaded_versions(routes.name):
            aliases = routes.aliases_of(served.version)
            entries.append(f"{served.version_id} ({', '.join(aliases)})" if aliases else served.version_id)
        return ", ".join(entries) or "nothing loaded"

    def loaded_versions(self, name: str) -> list[ServedVersion]:
        """The model's versions that take new requests."""
        return [served for served in self.pool.held() if served.name == name and self.pool.get(served.version_id)]

    def unready_stables(self) -> list[str]:
        """Stables that cannot take requests now (all loaded and running: the server is healthy)."""
        unready = []
        for routes in self.routes.values():
            served = self.pool.get(version_id(routes.name, routes.stable))
            if served is None or not served.engine.is_running:
                unready.append(version_id(routes.name, routes.stable))
        return unready
