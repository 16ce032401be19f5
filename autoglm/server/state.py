"""The server's life: loading the model, ready, draining; and who may be served in each phase."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus

from fastapi import Request

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import EngineStats, LLMEngine
from autoglm.errors import quote_value
from autoglm.model_paths import DEFAULT_MODEL_NAME
from autoglm.server.async_engine import AsyncEngine
from autoglm.server.errors import APIError
from autoglm.server.metrics import ServerMetrics
from autoglm.server.native_memory import bound_onednn_primitive_cache
from autoglm.server.response_cache.cache import response_cache_from_config
from autoglm.server.tenants.access import request_principal
from autoglm.server.tenants.keyring import KeyRing
from autoglm.server.tenants.usage import UsageLedger, default_usage_db
from autoglm.server.tokenizer_pool import TokenizerPool
from autoglm.server.tracking import RequestTracker

logger = logging.getLogger(__name__)


def served_model_name(config: AutoGLMConfig) -> str:
    """The name requests use for the model: as configured, else as given on the command line."""
    return config.served_model_name or config.model or DEFAULT_MODEL_NAME


class ServerState:
    """Shared by every route of one app; the engine is None until the model has loaded.

    With keys (`keyring`), each tenant's usage is counted in the usage_db file.
    """

    def __init__(self, config: AutoGLMConfig, keyring: KeyRing | None = None) -> None:
        self.config = config
        self.keyring = keyring
        self.usage = UsageLedger(config.usage_db or str(default_usage_db())) if keyring is not None else None
        self.model_name = served_model_name(config)
        self.created = int(time.time())
        self.engine: AsyncEngine | None = None
        self._tokenizers: TokenizerPool | None = None
        self.load_error: str | None = None
        self.draining = False
        self.metrics = ServerMetrics(self.model_name, self.engine_stats,
                                     keyring.has_tenant if keyring is not None else lambda _: False)
        self.response_cache = response_cache_from_config(config, self.metrics)

    def engine_stats(self) -> EngineStats | None:
        return self.engine.stats if self.engine is not None else None

    def ready_engine(self, requested_model: str | None = None) -> AsyncEngine:
        """The engine, if it takes requests now and serves `requested_model`; else the APIError to answer."""
        if self.draining:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the server is shutting down and takes no new requests",
                           code="server_draining")
        if self.engine is None:
            message = self.load_error or "the model is still loading; retry once /health answers 200"
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, message, code="model_loading")
        if not self.engine.is_running:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the engine loop has stopped; the server must be restarted",
                           code="engine_not_running")
        if requested_model is not None and requested_model != self.model_name:
            raise APIError(HTTPStatus.NOT_FOUND, f"The model {quote_value(requested_model)} does not exist; this "
                           f"server serves '{self.model_name}'.", param="model", code="model_not_found")
        return self.engine

    @property
    def tokenizers(self) -> TokenizerPool:
        """The tokenizer workers: made with the engine, so any route that got past ready_engine has them."""
        assert self._tokenizers is not None, "the tokenizer workers start with the engine; call ready_engine first"
        return self._tokenizers

    def new_tracker(self, id_prefix: str, request: Request, prompt: object) -> RequestTracker:
        """The tracker of a request for `prompt` (its text or chat messages, logged only if log_prompts is on)."""
        principal = request_principal(request)
        return RequestTracker(f"{id_prefix}-{uuid.uuid4().hex}", self.metrics,
                              tenant=principal.tenant.id if principal is not None else None, usage=self.usage,
                              prompt=prompt if self.config.log_prompts else None)

    async def load(self, load_engine: Callable[[], LLMEngine]) -> None:
        """Build the engine and the tokenizer workers off the event loop, so /health can answer 503
        meanwhile, then start the engine."""
        bound_onednn_primitive_cache()
        try:
            engine = await asyncio.to_thread(load_engine)
            self._tokenizers = await asyncio.to_thread(TokenizerPool, engine.tokenizer, self.config.tokenizer_workers,
                                                       engine.prompt_char_limit)
        except Exception as error:
            logger.exception("loading the model failed")
            self.load_error = f"loading the model failed: {type(error).__name__}: {error}"
            raise
        self.engine = AsyncEngine(engine, self.config.max_waiting_requests, self.config.request_timeout_s)
        self.engine.start()
        logger.info("model %s loaded; serving requests", self.model_name)

    async def drain(self) -> None:
        """Refuse new requests, then give the open ones up to drain_timeout_s to finish."""
        self.draining = True
        if self.engine is None:
            return
        timeout_s = self.config.drain_timeout_s
        logger.info("draining: waiting up to %gs for %d open requests", timeout_s, self.engine.num_open_requests)
        if not await self.engine.wait_until_idle(timeout_s):
            logger.warning("drain_timeout_s passed with %d requests still open; they end now",
                           self.engine.num_open_requests)

    async def shutdown(self) -> None:
        if self._tokenizers is not None:
            self._tokenizers.shutdown()
        if self.engine is not None:
            await self.engine.shutdown()
        if self.response_cache is not None:
            await self.response_cache.close()
