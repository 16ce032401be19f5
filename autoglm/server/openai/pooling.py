"""The flow every pooling route shares: route to a model that pools, tokenize, admit within the tenant's limits,
pool on the engine, count usage, answer.

A route supplies its prompts and PoolingParams (from the model it was routed to: a classifier scores pairs, an
embedding model embeds each text) and the response built from the outputs. Bad input is a 400 in OpenAI's error
shape before anything is queued; a model that does not pool is named, with the kinds of model that do.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.pooling.pair_prompts import cosine_scores, pair_prompt
from autoglm.engine.pooling.requests import WHICH_MODELS_POOL, check_pooling_params
from autoglm.engine.tokenize import Prompt
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.outputs import PoolingRequestOutput, RequestOutput
from autoglm.pooling_params import PoolingParams
from autoglm.server.batches.line_priority import scheduling_priority
from autoglm.server.dependencies import allowed_model
from autoglm.server.http.disconnect import ClientDisconnected, until_disconnected
from autoglm.server.observability.tracking import CLIENT_CLOSED_REQUEST, RequestTracker
from autoglm.server.openai.errors import to_api_error
from autoglm.server.openai.generation import tenant_tag
from autoglm.server.openai.pooling_protocol import PoolingRequest, PoolingUsage
from autoglm.server.state import ServerState
from autoglm.server.tenants.rate_limits import GenerationCost
from autoglm.server.tenants.request_budget import request_budget
from autoglm.server.versions.served_version import ServedVersion


@dataclass
class PoolingWork:
    """What a route asks of the engine: its prompts (texts or token ids) under one PoolingParams, and, for a
    route that scores pairs, how the outputs become one score per pair."""

    prompts: list[Prompt]
    params: PoolingParams
    scores: Callable[[list[PoolingRequestOutput]], list[float]] | None = None


@dataclass
class PooledAnswer:
    request_id: str
    created: int
    model: str  # the served version's id
    outputs: list[PoolingRequestOutput]
    scores: list[float] | None
    usage: PoolingUsage


WorkBuilder = Callable[[ServedVersion, PoolingModel], Awaitable[PoolingWork]]


async def serve_pooling(raw: Request, state: ServerState, body: PoolingRequest, id_prefix: str, logged: object,
                        build: WorkBuilder, respond: Callable[[PooledAnswer], BaseModel]) -> Response:
    """Answer one pooling request; a failure is raised as an APIError, a client gone first is answered with
    nothing (logged as 499)."""
    body.model = allowed_model(raw, state, body.model, generates=True)
    tracker = state.new_tracker(id_prefix, raw, logged)
    with tracker.logging_rejection():
        served = state.serve(body.model, tracker, body.user)
        engine = served.engine
        model = engine.pooling_model
        if model is None:
            raise InvalidRequestError(f"the model {quote_value(body.model)} generates text and does not pool; "
                                      f"{WHICH_MODELS_POOL}", param="model")
        if served.lora is not None:
            raise InvalidRequestError(f"the model {quote_value(body.model)} is a LoRA adapter, and adapters only "
                                      "generate: pool with its base model's name", param="model")
        work = await build(served, model)
        _check_count(len(work.prompts), engine.config.pooling.max_pooling_inputs)
        check_pooling_params(model, work.params)
        prompts = [await served.tokenizers.encode(prompt) if isinstance(prompt, str) else prompt
                   for prompt in work.prompts]
        await _admit(raw, [len(prompt) for prompt in prompts])
    try:
        outputs = await until_disconnected(raw, engine.encode(
            tracker.request_id, prompts, work.params, priority=scheduling_priority(raw, body.priority),
            tenant=tenant_tag(raw)))
    except ClientDisconnected:
        tracker.finish(CLIENT_CLOSED_REQUEST)
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except Exception as error:
        api_error = to_api_error(error, tracker.request_id)
        tracker.finish(api_error.status, api_error.body.error.message)
        raise api_error from error
    _count_usage(tracker, outputs)
    tracker.finish(HTTPStatus.OK)
    prompt_tokens = sum(len(output.prompt_token_ids) for output in outputs)
    answer = PooledAnswer(tracker.request_id, int(tracker.arrival_time), served.version_id, outputs,
                          work.scores(outputs) if work.scores is not None else None,
                          PoolingUsage(prompt_tokens=prompt_tokens, total_tokens=prompt_tokens))
    return JSONResponse(respond(answer).model_dump(mode="json", exclude_none=True))


async def pair_work(served: ServedVersion, model: PoolingModel, pairs: list[tuple[str, str]],
                    truncate_prompt_tokens: int | None) -> PoolingWork:
    """Score each (query, document) pair: a classifier's sigmoid score of the pair as it reads pairs, or the
    cosine of an embedding model's two embeddings (each distinct text embedded once)."""
    if model.kind == "embed":
        texts = list(dict.fromkeys(text for pair in pairs for text in pair))
        where = {text: index for index, text in enumerate(texts)}

        def cosines(outputs: list[PoolingRequestOutput]) -> list[float]:
            vectors = [output.outputs.data for output in outputs]
            return cosine_scores([vectors[where[query]] for query, _ in pairs],
                                 [vectors[where[document]] for _, document in pairs])
        return PoolingWork(texts, PoolingParams(task="embed", truncate_prompt_tokens=truncate_prompt_tokens), cosines)
    prompts = [await served.tokenizers.run(lambda tokenizer, pair=pair: pair_prompt(tokenizer, model, *pair))
               for pair in pairs]
    params = PoolingParams(task="score", truncate_prompt_tokens=truncate_prompt_tokens)
    return PoolingWork(prompts, params, lambda outputs: [float(output.outputs.data[0]) for output in outputs])


def _check_count(count: int, limit: int) -> None:
    if count == 0:
        raise InvalidRequestError("the request holds no input; give at least one", param="input")
    if count > limit:
        raise InvalidRequestError(f"the request holds {count} inputs, more than the {limit} one request may hold "
                                  "(the max_pooling_inputs setting); split it", param="input")


async def _admit(raw: Request, prompt_lengths: list[int]) -> None:
    """Admit the request within its tenant's limits, if any: its prompt tokens, no completion tokens."""
    budget = request_budget(raw)
    if budget is not None:
        await budget.admit(GenerationCost(prompt_tokens=sum(prompt_lengths), completion_tokens=0,
                                          sequences=len(prompt_lengths), max_tokens_field="input"))


def _count_usage(tracker: RequestTracker, outputs: list[PoolingRequestOutput]) -> None:
    """Count each input's prompt tokens as a generation's are counted (usage, metrics, the log line)."""
    for output in outputs:
        tracker.observe(RequestOutput(output.request_id, None, output.prompt_token_ids, [], True, output.metrics,
                                      num_cached_tokens=output.num_cached_tokens))
    tracker.finish_reason = "stop"
