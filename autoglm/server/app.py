"""The FastAPI app: OpenAI's routes, vLLM's operational ones, and the model loading behind them."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from http import HTTPStatus

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.types import DecoratedCallable
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from autoglm import __version__
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import quote_value
from autoglm.registry.base import Registry
from autoglm.registry.configured import registry_from_config
from autoglm.server import admin
from autoglm.server.errors import APIError, install_error_handlers
from autoglm.server.http_metrics import HTTPMetricsMiddleware
from autoglm.server.metrics import ServerMetrics
from autoglm.server.models import admin_routes as model_admin
from autoglm.server.models.cards import model_cards
from autoglm.server.models.lifecycle import EngineLoader
from autoglm.server.models.routing import model_name_of
from autoglm.server.openapi import install_openapi
from autoglm.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeRequest,
    TokenizeResponse,
)
from autoglm.server.request_body import RequestBodyMiddleware
from autoglm.server.request_ids import RequestIdMiddleware, adopt_request_id
from autoglm.server.responses import ModelCard, ModelList, TokenizerInfo
from autoglm.server.serving_chat import create_chat_completion, tokenize_chat
from autoglm.server.serving_completions import create_completion
from autoglm.server.state import ServerState
from autoglm.server.stats_logger import log_engine_stats
from autoglm.server.tenants.access import check_access, check_admin, may_use_model
from autoglm.server.tenants.authentication import AuthenticationMiddleware
from autoglm.server.tenants.keyring import KeyRing, keyring_from_config
from autoglm.server.tenants.rate_limit_middleware import RateLimitMiddleware
from autoglm.server.tenants.rate_limit_storage import rate_limit_storage
from autoglm.server.tenants.rate_limits import LimitWindows, TenantRateLimiter
from autoglm.server.tokenizer_info import tokenizer_info_of
from autoglm.server.trusted_hosts import HostAllowListMiddleware, default_allowed_hosts

logger = logging.getLogger(__name__)
router = APIRouter()


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Depends(server_state)


def get_and_head(path: str) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """A GET route that answers HEAD too (its status and headers without the body): one route, so a 405's
    Allow names both. The OpenAPI document lists the GET alone (see openapi.py)."""
    return router.api_route(path, methods=["GET", "HEAD"])


@get_and_head("/health")
async def health(state: ServerState = State) -> Response:
    """200 while requests are served (every model's stable loaded and running); 503 while loading, draining,
    after an engine loop died, or while an engine is stalled (see engine_stall_timeout_s)."""
    state.check_ready()
    state.check_not_stalled()
    return Response(status_code=200)


@get_and_head("/version")
async def version() -> dict[str, str]:
    return {"version": __version__}


@get_and_head("/metrics")
async def metrics(raw: Request, state: ServerState = State) -> Response:
    """Open, or for an admin key only with the metrics_require_key setting (it shows every tenant's usage)."""
    check_admin(raw)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@get_and_head("/v1/models")
async def list_models(raw: Request, state: ServerState = State) -> ModelList:
    """Each served model the key's tenant may use: by name, and (from a registry) each loaded version with its
    aliases."""
    state.check_ready()
    return ModelList(data=_usable_cards(raw, state))


@get_and_head("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, raw: Request, state: ServerState = State) -> ModelCard:
    """One card of /v1/models by its id; a model the key's tenant may not use is as unknown as one not served."""
    state.check_ready()
    card = next((card for card in _usable_cards(raw, state) if card.id == model_id), None)
    if card is None:
        raise APIError(HTTPStatus.NOT_FOUND, f"the model {quote_value(model_id)} does not exist or you do not have "
                       f"access to it; GET /v1/models lists those you may use", param="model", code="model_not_found")
    return card


def _usable_cards(raw: Request, state: ServerState) -> list[ModelCard]:
    return [card for card in model_cards(state.router, state.created) if may_use_model(raw, model_name_of(card.id))]


@get_and_head("/tokenizer_info")
async def tokenizer_info(raw: Request, model: str | None = None, state: ServerState = State) -> TokenizerInfo:
    """vLLM's: the tokenizer's special tokens and chat template, for clients that tokenize and render prompts
    themselves through /tokenize (lm-evaluation-harness asks it when given no tokenizer of its own)."""
    model = allowed_model(raw, state, model, generates=False)
    engine = state.route(model).engine.engine
    return tokenizer_info_of(engine.tokenizer, engine.max_context_len)


def allowed_model(raw: Request, state: ServerState, requested_model: str | None, *, generates: bool) -> str:
    """The model the request is for (an omitted one chosen among those the key's tenant may use), once the key
    may use it."""
    model = state.choose_model(raw, requested_model)
    check_access(raw, model_name_of(model), generates=generates)
    return model


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, raw: Request, state: ServerState = State) -> TokenizeResponse:
    """Token ids on a tokenizer worker; a text longer than the context could hold is refused untokenized."""
    body.model = allowed_model(raw, state, body.model, generates=False)
    served = state.route(body.model)
    if body.messages is not None:
        tokens = await tokenize_chat(served.tokenizers, body.messages, body.add_generation_prompt,
                                     continue_final_message=body.continue_final_message,
                                     template_kwargs=body.chat_template_kwargs)
    else:
        tokens = await served.tokenizers.encode(body.prompt, add_special_tokens=body.add_special_tokens)
    return TokenizeResponse(count=len(tokens), max_model_len=served.engine.engine.max_context_len, tokens=tokens)


@router.post("/detokenize")
async def detokenize(body: DetokenizeRequest, raw: Request, state: ServerState = State) -> DetokenizeResponse:
    body.model = allowed_model(raw, state, body.model, generates=False)
    served = state.route(body.model)
    served.engine.inputs.check_token_ids(body.tokens, "tokens")
    return DetokenizeResponse(prompt=await served.tokenizers.decode(body.tokens))


@router.post("/v1/completions")
async def completions(body: CompletionRequest, raw: Request, state: ServerState = State) -> Response:
    adopt_request_id(raw, body.request_id)
    body.model = allowed_model(raw, state, body.model, generates=True)
    return await create_completion(raw, state, body)


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, raw: Request, state: ServerState = State) -> Response:
    adopt_request_id(raw, body.request_id)
    body.model = allowed_model(raw, state, body.model, generates=True)
    return await create_chat_completion(raw, state, body)


def build_app(config: AutoGLMConfig, load_engine: Callable[[], LLMEngine] | None = None,
              on_load_failure: Callable[[], None] | None = None,
              on_engine_broken: Callable[[], None] | None = None,
              limit_windows: LimitWindows = LimitWindows(), registry: Registry | None = None,
              load_version: EngineLoader | None = None) -> FastAPI:
    """An app that starts loading the model when it starts, answering 503 until the model is ready.

    With serve_models set it serves those versions of `registry` (default: the one the settings name), each
    engine built by `load_version` (default: an LLMEngine of its checkpoint); else the one model
    `load_engine` builds (default: an LLMEngine from `config`). `on_load_failure` is called if loading
    raises (the server cannot serve anything after that), `on_engine_broken` (from any thread) if a loaded
    engine breaks for good (a tensor-parallel worker died). `limit_windows` shortens the tenants'
    rate-limit windows, for tests.
    """
    keyring = keyring_from_config(config)  # a bad tenants file stops the start
    limiter = None
    if keyring is None:
        logger.warning("neither tenants_file nor api_key is set: anyone who reaches the server may use it")
    else:  # a Redis URL without its client stops the start
        limiter = TenantRateLimiter(rate_limit_storage(config.rate_limit_storage), limit_windows)
    if config.serve_models and registry is None:
        registry = registry_from_config(config)
    state = ServerState(config, keyring, registry if config.serve_models else None, load_version)
    state.pool.on_engine_broken = on_engine_broken
    load = load_engine or partial(LLMEngine, config)

    def loaded(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and on_load_failure is not None:
            on_load_failure()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(state.load(load))
        loading.add_done_callback(loaded)
        stats = asyncio.create_task(log_engine_stats(state.engine_stats, config.log_stats_interval_s))
        usage = state.usage
        usage_flushes = (asyncio.create_task(usage.flush_periodically(config.usage_flush_interval_s))
                         if usage is not None else None)
        yield
        loading.cancel()
        stats.cancel()
        await state.shutdown()
        if usage is not None and usage_flushes is not None:
            usage_flushes.cancel()
            await usage.close()  # what the last requests added

    docs = config.enable_api_docs
    app = FastAPI(title="Open-AutoGLM", version=__version__, lifespan=lifespan,
                  docs_url="/docs" if docs else None, redoc_url="/redoc" if docs else None)
    app.state.server = state
    install_error_handlers(app)
    routers = [router]
    if keyring is not None:  # no tenants to administer without keys
        routers.append(admin.router)
    if state.lifecycle is not None:
        routers.append(model_admin.router)
    for served in routers:
        app.include_router(served)
    _add_middleware(app, config, state.metrics, keyring, limiter,
                    [route for served in routers for route in served.routes])
    install_openapi(app, config)
    return app


def _add_middleware(app: FastAPI, config: AutoGLMConfig, metrics: ServerMetrics, keyring: KeyRing | None,
                    limiter: TenantRateLimiter | None, routes: list[BaseRoute]) -> None:
    """Each added one wraps those before it: the counters see every answer, refusals included;
    a foreign Host is refused before anything else; a body is read only for a request let in,
    with a valid key where keys are needed; every answer to a key of a tenant with limits says
    what is left of its budget."""
    app.add_middleware(RequestBodyMiddleware, max_bytes=config.max_request_body_bytes,
                       read_timeout_s=config.body_read_timeout_s)
    if limiter is not None:
        app.add_middleware(RateLimitMiddleware, limiter=limiter)
    if keyring is not None:
        app.add_middleware(AuthenticationMiddleware, keyring=keyring, keyed_metrics=config.metrics_require_key)
    if config.cors_allowed_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_allowed_origins),
                           allow_methods=["GET", "HEAD", "POST"], allow_headers=["*"])
    app.add_middleware(HostAllowListMiddleware, allowed=config.allowed_hosts or default_allowed_hosts(config.host))
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics, routes=routes)
    app.add_middleware(RequestIdMiddleware)
