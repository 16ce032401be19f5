"""Adapters served by name on the default model: those lora_modules names at the start, and those the admin
routes load and unload while the server runs. (An adapter registered in the model registry is served as a
version instead: see versions/lifecycle.py.)"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from pathlib import Path

from autoglm.errors import quote_value
from autoglm.server.lora.served_adapter import ServedAdapter, require_lora
from autoglm.server.openai.errors import APIError
from autoglm.server.versions.pool import VersionPool
from autoglm.server.versions.routing import ModelRouter, ModelRoutes
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.versions.version_ids import VERSION_SEPARATOR

logger = logging.getLogger(__name__)


class ServedAdapters:
    """Each adapter is a model name of its own, routed to the default model's stable as it was when the adapter
    loaded, with the adapter applied."""

    def __init__(self, pool: VersionPool, router: ModelRouter) -> None:
        self._pool = pool
        self._router = router

    async def serve_at_start(self, modules: Mapping[str, str]) -> None:
        """Load lora_modules' adapters (trusted like the model: from wherever they are)."""
        for name, path in modules.items():
            await self.load(name, Path(path).expanduser().resolve())

    def check_enabled(self) -> None:
        """Refuse (400) adapters on a server whose default model runs without LoRA."""
        require_lora(self._base())

    async def load(self, name: str, folder: Path) -> bool:
        """Serve the adapter in `folder` as `name`; False if it already is (the same name and folder)."""
        base = self._base()
        self._check_name(name)
        named = self._named(name)
        if named is not None and named.lora.lora_path == str(folder):
            return False
        if name in self._router.routes:
            what = (f"the name of the adapter at {named.lora.lora_path}; unload it first" if named is not None
                    else "the name of a model this server serves")
            raise APIError(HTTPStatus.BAD_REQUEST, f"{quote_value(name)} is already {what}, or choose another "
                           "lora_name", param="lora_name", code="lora_name_taken")
        await self._pool.load_adapter(name, "", base, folder)
        self._router.routes[name] = ModelRoutes(name, "")
        return True

    async def unload(self, name: str) -> None:
        """Refuse new requests for the adapter at once, wait for those running, then unload it."""
        named = self._named(name)
        if named is None:
            served = name in self._router.routes
            refused = ("a model this server serves, not an adapter loaded by name (one from the model registry "
                       f"unloads with POST /admin/models/{name}/unload)" if served else "not a loaded adapter")
            raise APIError(HTTPStatus.BAD_REQUEST if served else HTTPStatus.NOT_FOUND,
                           f"{quote_value(name)} is {refused}; loaded adapters: {', '.join(self.names()) or 'none'}",
                           param="lora_name", code="not_an_adapter" if served else "lora_adapter_not_found")
        del self._router.routes[name]
        await self._pool.unload(named.version_id)
        logger.info("adapter %s unloaded", name)

    def names(self) -> list[str]:
        """The adapters loaded by name, sorted."""
        return sorted(name for name in self._router.routes if self._named(name) is not None)

    def _named(self, name: str) -> ServedAdapter | None:
        """The adapter loaded by name as `name` (not one of the registry's versions), if any."""
        served = self._router.stable_of(name)
        return served if isinstance(served, ServedAdapter) and not served.version else None

    def _base(self) -> ServedVersion:
        base = self._router.stable_of(self._router.default_name)
        if base is None:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the model is still loading; retry once /health "
                           "answers 200", code="model_loading")
        return base

    @staticmethod
    def _check_name(name: str) -> None:
        if not name or VERSION_SEPARATOR in name:
            raise APIError(HTTPStatus.BAD_REQUEST, f"lora_name {quote_value(name)} is not allowed: it is the model "
                           f"name requests use, and may not be empty or hold '{VERSION_SEPARATOR}' (which names "
                           "a version)", param="lora_name", code="invalid_value")
