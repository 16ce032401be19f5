"""The server's life: loading the models, ready, draining; and who may be served in each phase."""
from __future__ import annotations

import logging
import time
import uuid
from http import HTTPStatus

from fastapi import Request

from autoglm.config import ServerConfig
from autoglm.engine.client import EngineBuilder, EngineClient
from autoglm.engine.stats import EngineStats
from autoglm.kernels.cpu_extension import cpu_kernel_status
from autoglm.registry.base import Registry
from autoglm.server.openai.chat_parsers import ChatParsers
from autoglm.server.openai.errors import APIError
from autoglm.server.lora.served_adapters import ServedAdapters
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.response_cache.cache import response_cache_from_config
from autoglm.server.versions.lifecycle import EngineLoader, ModelLifecycle
from autoglm.server.versions.pool import VersionPool
from autoglm.server.versions.routing import ModelRouter, ModelRoutes, model_name_of
from autoglm.server.versions.served_names import served_model_name
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.http.request_ids import client_request_id
from autoglm.server.tenants.access import request_principal
from autoglm.server.tenants.keyring import KeyRing
from autoglm.server.tenants.usage import UsageLedger, default_usage_db
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.observability.tracking import RequestTracker

logger = logging.getLogger(__name__)


class ServerState:
    """Shared by every route of one app.

    Without a `registry` the server serves one model, `config.engine.model.model`, under one name; with one it
    serves the versions `config.versions.serve_models` names, and `lifecycle` changes them while it runs. With
    keys (`keyring`), each tenant's usage is counted in the usage_db file.
    """

    def __init__(self, config: ServerConfig, keyring: KeyRing | None = None, registry: Registry | None = None,
                 load_version: EngineLoader | None = None) -> None:
        self.config = config
        self.keyring = keyring
        self.usage = UsageLedger(config.tenants.usage_db or str(default_usage_db())) if keyring is not None else None
        self.model_name = served_model_name(config)
        self.created = int(time.time())
        self.load_error: str | None = None
        self.started = False
        self.draining = False
        self.chat_parsers = ChatParsers.from_config(config.chat)  # an unknown parser name stops the start
        self.metrics = ServerMetrics(self.model_name, self.engine_stats_by_version,
                                     keyring.has_tenant if keyring is not None else lambda _: False)
        self.response_cache = response_cache_from_config(config, self.metrics)
        capacity = config.versions.max_loaded_versions if registry is not None else 1
        self.pool = VersionPool(config, self.metrics, capacity)
        self.router = ModelRouter(self.pool, self.model_name)
        self.adapters = ServedAdapters(self.pool, self.router)
        self.lifecycle = (ModelLifecycle(config, registry, self.pool, self.router, load_version)
                          if registry is not None else None)

    @property
    def default_version(self) -> ServedVersion | None:
        """The default model's stable, once loaded."""
        return self.router.stable_of(self.model_name)

    @property
    def engine(self) -> EngineClient | None:
        """The default model's stable engine; None until it has loaded."""
        default = self.default_version
        return default.engine if default is not None else None

    @property
    def tokenizers(self) -> TokenizerPool:
        """The default model's tokenizer workers."""
        default = self.default_version
        assert default is not None, "the tokenizer workers start with the engine; check readiness first"
        return default.tokenizers

    def engine_stats(self) -> EngineStats | None:
        """The default model's stable engine's latest statistics (the periodic stats line)."""
        engine = self.engine
        return engine.stats if engine is not None else None

    def engine_stats_by_version(self) -> dict[str, EngineStats]:
        return self.pool.stats()

    def check_ready(self) -> None:
        """Refuse with 503 unless requests are taken: not draining, loaded, every model's stable running."""
        if self.draining:
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the server is shutting down and takes no new requests",
                           code="server_draining")
        if not self.started:
            message = self.load_error or "the model is still loading; retry once /health answers 200"
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, message, code="model_loading")
        if unready := self.router.unready_stables():
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, f"the engine loop of {', '.join(unready)} has stopped; "
                           "the server must be restarted", code="engine_not_running")

    def choose_model(self, raw: Request, requested_model: str | None) -> str:
        """The model a request is for: `requested_model`, or when it names none the default, else the first
        served model the key's tenant may use. For a key's tenant, a model it may use and the server does not
        serve is a 404 naming only models it may use, so that no answer tells a tenant of another's models
        (without keys, routing answers that 404, naming every model)."""
        principal = request_principal(raw)
        if principal is None:
            return requested_model or self.model_name
        self.check_ready()
        may_use = principal.tenant.may_use
        if requested_model is None:
            requested_model = self.router.default_for(may_use)
            if requested_model is None:
                raise APIError(HTTPStatus.FORBIDDEN, f"tenant '{principal.tenant.id}' may use none of the models "
                               f"this server serves; it may use: {', '.join(principal.tenant.models)}",
                               param="model", code="model_not_allowed")
        if may_use(model_name_of(requested_model)):
            self.router.check_served(requested_model, may_use)
        return requested_model

    def check_not_stalled(self) -> None:
        """Refuse with 503 while an engine has had work but ended no step for engine_stall_timeout_s: its
        requests are stuck, whatever else answers."""
        limit = self.config.http.engine_stall_timeout_s
        stalled = [(served.version_id, seconds) for served in self.pool.held()
                   if served.lora is None and (seconds := served.engine.heartbeat.stalled_for()) > limit]
        if stalled:
            names = ", ".join(f"{name} ({seconds:.0f} s)" for name, seconds in stalled)
            raise APIError(HTTPStatus.SERVICE_UNAVAILABLE, f"the engine of {names} has work but has ended no step "
                           f"for more than engine_stall_timeout_s={limit:g} seconds", code="engine_stalled")

    def route(self, requested_model: str | None, routing_key: str = "") -> ServedVersion:
        """The loaded version serving a request for `requested_model`; else the APIError to answer.
        `routing_key` (the request's user, else its id) picks the canary's share."""
        self.check_ready()
        return self.router.route(requested_model, routing_key)

    def serve(self, requested_model: str | None, tracker: RequestTracker, user: str | None) -> ServedVersion:
        """Route a generation request; it stays on the version it gets until it ends, whatever swaps meanwhile."""
        served = self.route(requested_model, user or tracker.request_id)
        served.take(tracker)
        return served

    def new_tracker(self, id_prefix: str, request: Request, prompt: object) -> RequestTracker:
        """The tracker of a request for `prompt` (its text or chat messages, logged only if log_prompts is on)."""
        principal = request_principal(request)
        return RequestTracker(f"{id_prefix}-{uuid.uuid4().hex}", self.metrics,
                              tenant=principal.tenant.id if principal is not None else None, usage=self.usage,
                              prompt=prompt if self.config.http.log_prompts else None,
                              client_request_id=client_request_id(request))

    async def load(self, load_engine: EngineBuilder) -> None:
        """Load what the server serves off the event loop, so /health can answer 503 meanwhile: the versions
        serve_models names, or else the one model `load_engine` builds; then lora_modules' adapters."""
        try:
            if self.lifecycle is not None:
                await self.lifecycle.serve_at_start(self.config.versions.serve_models)
            else:
                await self.pool.load(self.model_name, "", load_engine)
                self.router.routes[self.model_name] = ModelRoutes(self.model_name, "")
            await self.adapters.serve_at_start(self.config.adapters.lora_modules)
        except Exception as error:
            detail = error.body.error.message if isinstance(error, APIError) else f"{type(error).__name__}: {error}"
            if isinstance(error, ValueError):  # a setting the model refuses: one line, as the command line says it
                logger.error("loading the model failed: %s", error)
            else:
                logger.exception("loading the model failed")
            self.load_error = f"loading the model failed: {detail}"
            raise
        self.started = True
        logger.info("%s loaded; serving requests", ", ".join(served.version_id for served in self.pool.held()))
        kernels = cpu_kernel_status()
        if kernels is not None and kernels.startswith("building"):
            logger.info("serving on plain PyTorch while the CPU kernels are %s; each engine switches to them at a "
                        "step with no request running (GET /health says where they stand)", kernels)

    async def drain(self) -> None:
        """Refuse new requests, then give the open ones up to drain_timeout_s to finish."""
        self.draining = True
        timeout_s = self.config.http.drain_timeout_s
        logger.info("draining: waiting up to %gs for %d open requests", timeout_s, self.pool.num_in_flight())
        if not await self.pool.wait_until_idle(timeout_s):
            logger.warning("drain_timeout_s passed with %d requests still open; they end now",
                           self.pool.num_in_flight())

    async def shutdown(self) -> None:
        await self.pool.shutdown()
        if self.response_cache is not None:
            await self.response_cache.close()
