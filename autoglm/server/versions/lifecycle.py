"""Load, unload, promote, roll back and split a canary, without dropping a request: a request finishes on
the version it started on; a version no route keeps unloads once its last request ends."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from http import HTTPStatus

from autoglm.config import ServerConfig
from autoglm.engine.client import EngineBuilder, engine_builder
from autoglm.errors import quote_value
from autoglm.registry.base import (
    CANARY_ALIAS,
    STABLE_ALIAS,
    ChecksumMismatchError,
    ModelVersion,
    Registry,
    RegistryError,
    verify_checksum,
)
from autoglm.server.openai.errors import APIError
from autoglm.server.versions.auto_rollback import CanaryWatch, RollbackThresholds
from autoglm.server.versions.canary import CanarySplit
from autoglm.server.versions.pool import VersionPool, version_config
from autoglm.server.versions.routing import ModelRouter, ModelRoutes
from autoglm.server.versions.served_version import ServedVersion, VersionState, version_id
from autoglm.server.observability.tracking import RequestOutcome

logger = logging.getLogger(__name__)

# How the engine of a registered version is built (tests may build it otherwise).
EngineLoader = Callable[[ModelVersion], EngineBuilder]


def engine_loader(config: ServerConfig) -> EngineLoader:
    """Each version's engine from its checkpoint, with the server's settings and a share of its KV budget."""
    return lambda version: engine_builder(version_config(config, version.path))


class ModelLifecycle:
    """The admin operations on the served models, one at a time. Registry aliases follow the server's:
    promote and rollback move `stable`, a canary split sets `canary` (0% removes it)."""

    def __init__(self, config: ServerConfig, registry: Registry, pool: VersionPool, router: ModelRouter,
                 load_engine: EngineLoader | None = None) -> None:
        self.registry = registry
        self.pool = pool
        self._router = router
        self._load_engine = load_engine or engine_loader(config)
        self._lock = asyncio.Lock()
        self._thresholds = RollbackThresholds.from_config(config) if config.versions.auto_rollback else None
        self._watches: dict[str, CanaryWatch] = {}
        self._background: set[asyncio.Task[None]] = set()
        # Told (model, canary version) after an automatic rollback here, for the replicas beside this one.
        self.on_automatic_rollback: Callable[[str, str], None] | None = None
        if self._thresholds is not None:
            pool.on_outcome = self._judge_canary

    async def serve_at_start(self, references: tuple[str, ...]) -> None:
        """Load what `references` name; a model's first reference is its stable, any later one a warm standby."""
        for reference in references:
            version = await self._registry(self.registry.resolve, reference)
            await self._load(version)
            routes = self._router.routes.get(version.name)
            if routes is None:
                aliases = await self._registry(self.registry.aliases, version.name)
                self._router.routes[version.name] = ModelRoutes(version.name, version.version,
                                                                registry_aliases=aliases)
            elif version.version != routes.stable:
                routes.pinned.add(version.version)

    def all_routes(self) -> list[ModelRoutes]:
        """The registry's served models (adapters loaded by name, which have no versions, are not among them)."""
        return [routes for routes in self._router.routes.values() if routes.stable]

    def routes(self, name: str) -> ModelRoutes:
        routes = self._router.routes.get(name)
        if routes is None:
            raise APIError(HTTPStatus.NOT_FOUND, f"this server does not serve a model {quote_value(name)}; it serves: "
                           f"{', '.join(self._router.routes) or 'none'}", param="name", code="model_not_found")
        return routes

    async def load(self, name: str, version: str) -> ModelRoutes:
        """Load a version as warm standby: it takes only the requests that name it, or an alias of it."""
        async with self._lock:
            routes = self.routes(name)
            await self._load(await self._version(name, version))
            if version not in routes.kept_loaded():
                routes.pinned.add(version)
            return routes

    async def unload(self, name: str, version: str) -> ModelRoutes:
        """Unload a version once its requests end; refused while it is the stable or the canary."""
        async with self._lock:
            routes = self.routes(name)
            canary = routes.canary.version if routes.canary is not None else None
            for alias, target in ((STABLE_ALIAS, routes.stable), (CANARY_ALIAS, canary)):
                if version == target:
                    raise APIError(HTTPStatus.CONFLICT, f"{version_id(name, version)} is the {alias}; promote or "
                                   "roll back to another version (or clear the canary) before unloading it",
                                   code="version_in_use")
            if adapters := self.pool.adapters_on(version_id(name, version)):
                raise APIError(HTTPStatus.CONFLICT, f"the LoRA adapters {', '.join(adapters)} run on "
                               f"{version_id(name, version)}; unload them before it", code="version_in_use")
            routes.pinned.discard(version)
            self.pool.retire(version_id(name, version))
            return routes

    async def promote(self, name: str, version: str) -> ModelRoutes:
        """Make the version the stable (loading it if needed); the old stable stays loaded for rollback.
        A version that fails to load or to match its checksum is refused and the old stable keeps serving."""
        async with self._lock:
            routes = self.routes(name)
            await self._load(await self._version(name, version))
            if version == routes.stable:
                return routes
            await self._registry(self.registry.set_alias, name, STABLE_ALIAS, version)
            routes.previous_stables.append(routes.stable)
            routes.stable = version
            routes.pinned.discard(version)
            if routes.canary is not None and routes.canary.version == version:
                await self._clear_canary_alias(routes)
            logger.info("%s promoted to stable (previous: %s)", version_id(name, version),
                        version_id(name, routes.previous_stables[-1]))
            self._retire_unused(routes)
            return routes

    async def rollback(self, name: str) -> ModelRoutes:
        """Make the previous stable the stable again; the rolled-back one unloads once its requests end."""
        async with self._lock:
            routes = self.routes(name)
            if not routes.previous_stables:
                raise APIError(HTTPStatus.CONFLICT, f"{name} has no previous stable to roll back to; its stable is "
                               f"{version_id(name, routes.stable)}", code="nothing_to_roll_back")
            previous = routes.previous_stables[-1]
            await self._load(await self._version(name, previous))
            await self._registry(self.registry.set_alias, name, STABLE_ALIAS, previous)
            rolled_back = routes.stable
            routes.previous_stables.pop()
            routes.stable = previous
            logger.info("%s rolled back to %s", version_id(name, rolled_back), version_id(name, previous))
            self._retire_unused(routes)
            return routes

    async def set_canary(self, name: str, version: str, percent: float) -> ModelRoutes:
        """Send `percent` of the model's requests to `version` (loading it if needed); 0 clears the split."""
        async with self._lock:
            routes = self.routes(name)
            if percent == 0:
                await self._clear_canary_alias(routes)
            else:
                if version == routes.stable:
                    raise APIError(HTTPStatus.CONFLICT, f"{version_id(name, version)} is already the stable; a "
                                   "canary must be another version", param="version", code="version_in_use")
                await self._load(await self._version(name, version))
                await self._registry(self.registry.set_alias, name, CANARY_ALIAS, version)
                routes.canary = CanarySplit(version, percent)
                routes.pinned.discard(version)
                self._watches.pop(version_id(name, version), None)
                logger.info("canary %s takes %g%% of %s's requests", version_id(name, version), percent, name)
            self._retire_unused(routes)
            return routes

    def _judge_canary(self, served: ServedVersion, outcome: RequestOutcome) -> None:
        """Automatic rollback: a canary that breaks a threshold goes back to 0% of the traffic at once."""
        assert self._thresholds is not None
        routes = self._router.routes.get(served.name)
        if routes is None or routes.canary is None or routes.canary.version != served.version:
            return
        watch = self._watches.setdefault(served.version_id, CanaryWatch(self._thresholds))
        reason = watch.record(outcome)
        if reason is None:
            return
        logger.warning("automatic rollback: canary %s goes back to 0%% of %s's requests: %s", served.version_id,
                       served.name, reason)
        self._drop_canary(routes)
        task = asyncio.create_task(self._forget_canary_alias(served.name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if self.on_automatic_rollback is not None:
            self.on_automatic_rollback(served.name, served.version)

    async def end_canary(self, name: str, version: str) -> None:
        """Send `version` back to 0% of `name`'s requests if it is still the canary here: another replica
        rolled it back automatically (and removed the registry's alias)."""
        async with self._lock:
            routes = self._router.routes.get(name)
            if routes is None or routes.canary is None or routes.canary.version != version:
                return
            logger.warning("canary %s goes back to 0%% of %s's requests: another replica rolled it back",
                           version_id(name, version), name)
            self._drop_canary(routes)

    def _drop_canary(self, routes: ModelRoutes) -> None:
        assert routes.canary is not None
        self._watches.pop(version_id(routes.name, routes.canary.version), None)
        routes.canary = None
        self._retire_unused(routes)

    async def _forget_canary_alias(self, name: str) -> None:
        try:
            await self._registry(self.registry.remove_alias, name, CANARY_ALIAS)
        except APIError as error:
            logger.error("the registry still names a canary for %s: %s", name, error.body.error.message)

    async def _clear_canary_alias(self, routes: ModelRoutes) -> None:
        if routes.canary is None:
            return
        await self._registry(self.registry.remove_alias, routes.name, CANARY_ALIAS)
        logger.info("canary %s cleared", version_id(routes.name, routes.canary.version))
        routes.canary = None

    def _retire_unused(self, routes: ModelRoutes) -> None:
        """Retire the model's versions no route keeps, except those whose engines hold adapters still served."""
        kept = routes.kept_loaded()
        for served in self._router.loaded_versions(routes.name):
            if served.version not in kept and not self.pool.adapters_on(served.version_id):
                self.pool.retire(served.version_id)

    async def _version(self, name: str, version: str) -> ModelVersion:
        return await self._registry(self.registry.version, name, version)

    async def _load(self, version: ModelVersion) -> ServedVersion:
        """The version loaded, its weight files checked against the registry's checksum first."""
        served_id = version_id(version.name, version.version)
        if (loaded := self.pool.get(served_id)) is not None:
            return loaded
        try:
            await asyncio.to_thread(verify_checksum, version)
        except ChecksumMismatchError as error:
            raise APIError(HTTPStatus.UNPROCESSABLE_ENTITY, f"refused to load {served_id}: {error}",
                           code="checksum_mismatch") from None
        try:
            if version.base_sha256 is not None:
                return await self.pool.load_adapter(version.name, version.version, self._pinned_base(version),
                                                    version.path)
            return await self.pool.load(version.name, version.version, self._load_engine(version), version.sha256)
        except APIError:
            raise
        except Exception as error:
            logger.exception("loading %s failed", served_id)
            raise APIError(HTTPStatus.UNPROCESSABLE_ENTITY, f"loading {served_id} from {version.path} failed: "
                           f"{type(error).__name__}: {error}", code="model_load_failed") from None

    def _pinned_base(self, adapter: ModelVersion) -> ServedVersion:
        """The loaded model whose weights are the ones the adapter was registered on; refused (422) if none."""
        models = [served for served in self.pool.held() if served.lora is None]
        for served in models:
            if served.state is VersionState.LOADED and served.answer_source.weights_sha256 == adapter.base_sha256:
                return served
        loaded = ", ".join(f"{served.version_id} ({served.answer_source.weights_sha256[:12]}...)"
                           for served in models)
        raise APIError(HTTPStatus.UNPROCESSABLE_ENTITY, f"refused to load {adapter.reference}: it is a LoRA adapter "
                       f"pinned to the base model with weights SHA-256 {str(adapter.base_sha256)[:12]}..., and no "
                       f"loaded model has those weights (loaded: {loaded or 'none'}); serve its base first",
                       code="base_mismatch")

    @staticmethod
    async def _registry(operation: Callable[..., object], *args: object):
        """A registry call off the event loop (a backend reads files or a server); its refusal as a 404."""
        try:
            return await asyncio.to_thread(operation, *args)
        except RegistryError as error:
            raise APIError(HTTPStatus.NOT_FOUND, str(error), code="registry_error") from None
