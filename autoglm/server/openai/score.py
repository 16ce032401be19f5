"""POST /v1/score (also /score): the relevance of text pairs, in vLLM's shape (one text_1 against each text_2,
or the two lists item by item)."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.pooling.pair_prompts import score_pairs
from autoglm.server.dependencies import State
from autoglm.server.openai.pooling import PooledAnswer, PoolingWork, pair_work, serve_pooling
from autoglm.server.openai.pooling_protocol import ScoreData, ScoreRequest, ScoreResponse
from autoglm.server.state import ServerState
from autoglm.server.versions.served_version import ServedVersion

router = APIRouter()


@router.post("/v1/score")
@router.post("/score")
async def score(body: ScoreRequest, raw: Request, state: ServerState = State) -> Response:
    async def work(served: ServedVersion, model: PoolingModel) -> PoolingWork:
        return await pair_work(served, model, score_pairs(body.text_1, body.text_2), body.truncate_prompt_tokens)

    def respond(answer: PooledAnswer) -> ScoreResponse:
        return ScoreResponse(id=answer.request_id, created=answer.created, model=answer.model,
                             data=[ScoreData(index=index, score=value) for index, value in enumerate(answer.scores)],
                             usage=answer.usage)

    return await serve_pooling(raw, state, body, "score", [body.text_1, body.text_2], work, respond)
