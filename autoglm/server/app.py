"""The FastAPI app: vLLM's operational routes, the OpenAI routes of openai/ and Anthropic's of anthropic/ mounted
beside them, and the model loading behind them."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from autoglm import __version__
from autoglm.config import ServerConfig
from autoglm.engine.client import EngineBuilder, engine_builder
from autoglm.kernels.cpu_extension import cpu_kernel_status
from autoglm.registry.base import Registry
from autoglm.registry.configured import registry_from_config
from autoglm.server.anthropic import routes as anthropic
from autoglm.server.anthropic.error_shape import AnthropicErrorShapeMiddleware
from autoglm.server.batches import batch_routes, file_routes
from autoglm.server.batches.dispatch import in_process_host
from autoglm.server.batches.endpoints import BatchEndpoints
from autoglm.server.batches.service import BatchService
from autoglm.server.batches.timing import BatchClock
from autoglm.server.dependencies import State, get_and_head
from autoglm.server.lora import routes as lora
from autoglm.server.openai import chat, completions, embeddings, models, rerank, score, tokenize
from autoglm.server.responses_api import routes as responses_api
from autoglm.server.tenants import admin_routes as admin
from autoglm.server.openai.errors import install_error_handlers
from autoglm.server.observability.http_metrics import HTTPMetricsMiddleware
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.versions import admin_routes as model_admin
from autoglm.server.versions.lifecycle import EngineLoader
from autoglm.server.openai.openapi import install_openapi
from autoglm.server.http.request_body import BodyLimit, RequestBodyMiddleware
from autoglm.server.http.request_ids import RequestIdMiddleware
from autoglm.server.state import ServerState
from autoglm.server.observability.stats_logger import log_engine_stats
from autoglm.server.tenants.access import check_admin
from autoglm.server.tenants.authentication import AuthenticationMiddleware
from autoglm.server.tenants.keyring import KeyRing, keyring_from_config
from autoglm.server.tenants.rate_limit_middleware import RateLimitMiddleware
from autoglm.server.tenants.rate_limit_storage import rate_limit_storage
from autoglm.server.tenants.rate_limits import LimitWindows, TenantRateLimiter
from autoglm.server.http.trusted_hosts import HostAllowListMiddleware, default_allowed_hosts

logger = logging.getLogger(__name__)
router = APIRouter()


@get_and_head(router, "/health")
async def health(state: ServerState = State) -> Response:
    """200 while requests are served (every model's stable loaded and running); 503 while loading, draining,
    after an engine loop died, or while an engine is stalled (see engine_stall_timeout_s). On the CPU the 200's
    body says where the compiled kernels stand: ``{"cpu_kernels": "building (about 70 s, started 12 s ago)"}``,
    ``ready`` or ``unavailable: <why>``; plain PyTorch serves until they are ready."""
    state.check_ready()
    state.check_not_stalled()
    kernels = cpu_kernel_status()
    if kernels is None:
        return Response(status_code=200)
    return JSONResponse({"cpu_kernels": kernels})


@get_and_head(router, "/version")
async def version() -> dict[str, str]:
    return {"version": __version__}


@get_and_head(router, "/metrics")
async def metrics(raw: Request, state: ServerState = State) -> Response:
    """Open, or for an admin key only with the metrics_require_key setting (it shows every tenant's usage)."""
    check_admin(raw)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def build_app(config: ServerConfig, load_engine: EngineBuilder | None = None,
              on_load_failure: Callable[[], None] | None = None,
              on_engine_broken: Callable[[], None] | None = None,
              limit_windows: LimitWindows = LimitWindows(), registry: Registry | None = None,
              load_version: EngineLoader | None = None, batch_clock: BatchClock = BatchClock(),
              single_replica: bool = True) -> FastAPI:
    """An app that starts loading the model when it starts, answering 503 until the model is ready.

    `config` is the server's part of the user's settings, split once where the server starts
    (``AutoGLMConfig.server_config()``: `autoglm serve`, Ray's application builder, the tests). With
    serve_models set it serves those versions of `registry` (default: the one the settings name), each engine
    built by `load_version` (default: an LLMEngine of its checkpoint); else the one model `load_engine` builds
    (default: an LLMEngine from `config.engine`). `on_load_failure` is called if loading raises (the server
    cannot serve anything after that), `on_engine_broken` (from any thread) if a loaded engine breaks for good
    (a tensor-parallel worker died). `limit_windows` shortens the tenants' rate-limit windows, and `batch_clock`
    times batches, for tests. Files and batches, and loading and unloading LoRA adapters, answer 501 unless the
    app is the `single_replica` serving them: each replica would keep its own.
    """
    keyring = keyring_from_config(config)  # a bad tenants file stops the start
    limiter = None
    if keyring is None:
        logger.warning("neither tenants_file nor api_key is set: anyone who reaches the server may use it")
    else:  # a Redis URL without its client stops the start
        limiter = TenantRateLimiter(rate_limit_storage(config.tenants.rate_limit_storage), limit_windows)
    if config.versions.serve_models and registry is None:
        registry = registry_from_config(config.versions)
    state = ServerState(config, keyring, registry if config.versions.serve_models else None, load_version)
    state.pool.on_engine_broken = on_engine_broken
    load = load_engine or engine_builder(config.engine)

    def loaded(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and on_load_failure is not None:
            on_load_failure()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(state.load(load))
        loading.add_done_callback(loaded)
        stats = asyncio.create_task(log_engine_stats(state.engine_stats, config.http.log_stats_interval_s))
        usage = state.usage
        usage_flushes = (asyncio.create_task(usage.flush_periodically(config.tenants.usage_flush_interval_s))
                         if usage is not None else None)
        if batches is not None:
            batches.start(app, lambda: state.started and not state.draining)
        yield
        loading.cancel()
        stats.cancel()
        if batches is not None:
            await batches.stop()  # its lines in flight run again at the next start
        await state.shutdown()
        if usage is not None and usage_flushes is not None:
            usage_flushes.cancel()
            await usage.close()  # what the last requests added

    docs = config.http.enable_api_docs
    app = FastAPI(title="Open-AutoGLM", version=__version__, lifespan=lifespan,
                  docs_url="/docs" if docs else None, redoc_url="/redoc" if docs else None)
    app.state.server = state
    routers = [router, models.router, tokenize.router, completions.router, chat.router, responses_api.router,
               anthropic.router, file_routes.router, batch_routes.router, embeddings.router, rerank.router,
               score.router, lora.router]
    if keyring is not None:  # no tenants to administer without keys
        routers.append(admin.router)
    if state.lifecycle is not None:
        routers.append(model_admin.router)
    for served in routers:
        app.include_router(served)
    routes = [route for served in routers for route in served.routes]
    install_error_handlers(app, routes)
    allowed_hosts = config.http.allowed_hosts or default_allowed_hosts(config.http.host)
    # Batch lines run at the lowest priority a request may take, below every interactive one.
    batches = (BatchService(config.storage, keyring, BatchEndpoints.of_routes(routes), in_process_host(allowed_hosts),
                            config.engine.scheduler.max_abs_priority, batch_clock) if single_replica else None)
    app.state.batches = batches
    app.state.single_replica = single_replica
    _add_middleware(app, config, state.metrics, keyring, limiter, allowed_hosts, routes)
    install_openapi(app, config)
    return app


def _add_middleware(app: FastAPI, config: ServerConfig, metrics: ServerMetrics, keyring: KeyRing | None,
                    limiter: TenantRateLimiter | None, allowed_hosts: tuple[str, ...], routes: list[BaseRoute]) -> None:
    """Each added one wraps those before it: the counters see every answer, refusals included;
    a foreign Host is refused before anything else; a body is read only for a request let in,
    with a valid key where keys are needed; every answer to a key of a tenant with limits says
    what is left of its budget; an error on Anthropic's routes, whoever answered it, takes Anthropic's shape."""
    upload = BodyLimit(config.storage.max_file_bytes + file_routes.FORM_ALLOWANCE_BYTES, "max_file_bytes")
    app.add_middleware(RequestBodyMiddleware, max_bytes=config.http.max_request_body_bytes,
                       read_timeout_s=config.http.body_read_timeout_s, uploads={file_routes.UPLOAD_PATH: upload})
    if limiter is not None:
        app.add_middleware(RateLimitMiddleware, limiter=limiter)
    if keyring is not None:
        app.add_middleware(AuthenticationMiddleware, keyring=keyring,
                           keyed_metrics=config.tenants.metrics_require_key)
    if config.http.cors_allowed_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(config.http.cors_allowed_origins),
                           allow_methods=["GET", "HEAD", "POST", "DELETE"], allow_headers=["*"])
    app.add_middleware(HostAllowListMiddleware, allowed=allowed_hosts)
    app.add_middleware(AnthropicErrorShapeMiddleware)
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics, routes=routes)
    app.add_middleware(RequestIdMiddleware)
