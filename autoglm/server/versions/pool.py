"""The versions loaded in one server, each its own engine with its own share of the KV cache budget,
all stepping on the one device."""
from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from pathlib import Path

from autoglm.config import EngineConfig, ServerConfig
from autoglm.engine.client import EngineBuilder, open_client
from autoglm.engine.stats import EngineStats
from autoglm.lora_request import LoRARequest
from autoglm.server.lora.served_adapter import ServedAdapter, adapter_answer_source, require_lora
from autoglm.server.openai.errors import APIError
from autoglm.server.media.prompt_images import PromptImages
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.versions.served_version import OutcomeListener, ServedVersion, VersionState
from autoglm.server.versions.version_ids import version_id
from autoglm.server.response_cache.source import answer_source
from autoglm.server.openai.tokenizer_pool import TokenizerPool

logger = logging.getLogger(__name__)


def kv_cache_share(budget: str | int | float, num_shares: int) -> str | int | float:
    """One version's part of the server's kv_cache_memory: an equal share of a size or a fraction;
    'auto' lets each engine size its own."""
    if budget == "auto":
        return budget
    if isinstance(budget, int):
        return max(1, budget // num_shares)
    return budget / num_shares


def version_config(config: ServerConfig, checkpoint: Path) -> EngineConfig:
    """The engine settings of one version: the server's, with its checkpoint and tokenizer and its KV share."""
    engine = config.engine.for_model(str(checkpoint))
    share = kv_cache_share(engine.cache.kv_cache_memory, config.versions.max_loaded_versions)
    return replace(engine, cache=replace(engine.cache, kv_cache_memory=share))


class VersionPool:
    """At most `capacity` versions loaded, loading or draining at once; a draining one still holds its memory.
    LoRA adapters, which live in their base's engine, do not count."""

    def __init__(self, config: ServerConfig, metrics: ServerMetrics, capacity: int) -> None:
        self._config = config
        self._metrics = metrics
        self._capacity = capacity
        self.on_outcome: OutcomeListener | None = None  # told how each request ended (automatic rollback)
        self.on_engine_broken: Callable[[], None] | None = None  # told, from any thread, that an engine broke
        self._versions: dict[str, ServedVersion] = {}
        self._loading: set[str] = set()
        self._retiring: set[asyncio.Task[None]] = set()
        self._lora_ids = itertools.count(1)  # the engines' ids of adapters, never reused

    def get(self, served_id: str) -> ServedVersion | None:
        """The version if it takes new requests."""
        served = self._versions.get(served_id)
        return served if served is not None and served.state is VersionState.LOADED else None

    def held(self) -> list[ServedVersion]:
        """Every version loaded or draining."""
        return list(self._versions.values())

    def state_of(self, served_id: str) -> VersionState:
        if served_id in self._loading:
            return VersionState.LOADING
        served = self._versions.get(served_id)
        return served.state if served is not None else VersionState.UNLOADED

    def in_flight(self, served_id: str) -> int:
        served = self._versions.get(served_id)
        return served.in_flight if served is not None else 0

    def adapters_on(self, served_id: str) -> list[str]:
        """The adapters held in the version's engine: while there are any, the version stays loaded."""
        return sorted(served.version_id for served in self._versions.values()
                      if isinstance(served, ServedAdapter) and served.base.version_id == served_id)

    def stats(self) -> dict[str, EngineStats]:
        """Each engine's, under the version it serves (an adapter's requests are its base's engine's)."""
        return {served.version_id: served.engine.stats for served in self._versions.values() if served.lora is None}

    async def load(self, name: str, version: str, load_engine: EngineBuilder,
                   registered_sha256: str | None = None) -> ServedVersion:
        """The version, loaded now if it is not loaded (off the event loop: requests go on being served).
        `registered_sha256` is the registry's checksum of its weights, which spares hashing them again."""
        served_id = version_id(name, version)
        if (loaded := self.get(served_id)) is not None:
            return loaded
        self._check_not_busy(served_id)
        held = [*self._loading, *(held_id for held_id, served in self._versions.items() if served.lora is None)]
        if len(held) >= self._capacity:
            raise APIError(HTTPStatus.CONFLICT, f"cannot load {served_id}: max_loaded_versions={self._capacity} "
                           f"are loaded, loading or draining ({', '.join(sorted(held))}); unload one first",
                           code="too_many_loaded_versions")
        self._loading.add(served_id)
        try:
            served = await self._start(name, version, load_engine, registered_sha256)
        finally:
            self._loading.discard(served_id)
        self._versions[served_id] = served
        logger.info("%s loaded", served_id)
        return served

    async def load_adapter(self, name: str, version: str, base: ServedVersion, folder: Path) -> ServedVersion:
        """The adapter at `folder`, installed in `base`'s engine now if it is not loaded; the engine's
        LoRAAdapterError if it does not fit the base, LoRACapacityError if no room can be made for it."""
        served_id = version_id(name, version)
        if (loaded := self.get(served_id)) is not None:
            return loaded
        require_lora(base)
        self._check_not_busy(served_id)
        self._loading.add(served_id)
        try:
            lora = LoRARequest(served_id, next(self._lora_ids), str(folder))
            await base.engine.add_lora(lora)
            source = await asyncio.to_thread(adapter_answer_source, base.answer_source, folder)
        finally:
            self._loading.discard(served_id)
        served = ServedAdapter(name, version, base, lora, source, self._metrics, self.on_outcome)
        self._versions[served_id] = served
        logger.info("%s loaded from %s into %s's engine", served_id, folder, base.version_id)
        return served

    async def unload(self, served_id: str) -> None:
        """Take no new request for the version, wait for those it has, then unload it."""
        served = self._versions.get(served_id)
        if served is None or served.state is not VersionState.LOADED:
            return
        await served.retire()
        del self._versions[served_id]

    def _check_not_busy(self, served_id: str) -> None:
        if served_id in self._loading or served_id in self._versions:
            raise APIError(HTTPStatus.CONFLICT, f"{served_id} is {self.state_of(served_id).value}; retry once it "
                           "is done", code="version_busy")

    async def _start(self, name: str, version: str, load_engine: EngineBuilder,
                     registered_sha256: str | None) -> ServedVersion:
        engine = await asyncio.to_thread(open_client, load_engine, self._config.http.max_waiting_requests,
                                         self._config.http.request_timeout_s)
        source = await asyncio.to_thread(answer_source, engine, registered_sha256)
        if (on_broken := self.on_engine_broken) is not None:
            engine.notify_when_broken(lambda _: on_broken())
        tokenizers = await asyncio.to_thread(TokenizerPool, engine.tokenizer, self._config.http.tokenizer_workers,
                                             engine.inputs.prompt_char_limit)
        images = await asyncio.to_thread(PromptImages.for_checkpoint, engine.model_path, self._config.media,
                                         self._config.http.tokenizer_workers)
        engine.start()
        return ServedVersion(name, version, engine, tokenizers, source, self._metrics, self.on_outcome, images)

    def retire(self, served_id: str) -> None:
        """Route nothing new to the version; it unloads (in the background) once its last request ends."""
        served = self._versions.get(served_id)
        if served is None or served.state is not VersionState.LOADED:
            return
        task = asyncio.create_task(served.retire())
        self._retiring.add(task)
        task.add_done_callback(lambda done: self._retired(served_id, done))

    def _retired(self, served_id: str, task: asyncio.Task[None]) -> None:
        self._retiring.discard(task)
        if self._versions.get(served_id) is not None and self._versions[served_id].state is VersionState.UNLOADED:
            del self._versions[served_id]

    async def wait_until_idle(self, timeout_s: float) -> bool:
        """Wait until no version has a request in flight; False if `timeout_s` passed first."""
        waits = [served.wait_until_idle() for served in self._versions.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    def num_in_flight(self) -> int:
        return sum(served.in_flight for served in self._versions.values())

    async def shutdown(self) -> None:
        for task in list(self._retiring):
            task.cancel()
        for served in list(self._versions.values()):
            if served.lora is None:  # an adapter goes with its base's engine
                await served.close()
