"""POST /v1/rerank (also /rerank and /v2/rerank): a query and documents in, the documents by relevance out, in
Jina's and Cohere's shape."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.server.dependencies import State
from autoglm.server.openai.pooling import PooledAnswer, PoolingWork, pair_work, serve_pooling
from autoglm.server.openai.pooling_protocol import RerankDocument, RerankRequest, RerankResponse, RerankResult
from autoglm.server.state import ServerState
from autoglm.server.versions.served_version import ServedVersion

router = APIRouter()


@router.post("/v1/rerank")
@router.post("/v2/rerank")
@router.post("/rerank")
async def rerank(body: RerankRequest, raw: Request, state: ServerState = State) -> Response:
    documents = [document if isinstance(document, str) else document.text for document in body.documents]

    async def work(served: ServedVersion, model: PoolingModel) -> PoolingWork:
        if body.top_n is not None and body.top_n < 1:
            raise InvalidRequestError(f"top_n must be at least 1, got {quote_value(body.top_n)}", param="top_n")
        return await pair_work(served, model, [(body.query, document) for document in documents],
                               body.truncate_prompt_tokens)

    def respond(answer: PooledAnswer) -> RerankResponse:
        results = [RerankResult(index=index, relevance_score=score,
                                document=RerankDocument(text=documents[index]) if body.return_documents else None)
                   for index, score in enumerate(answer.scores)]
        results.sort(key=lambda result: -result.relevance_score)
        return RerankResponse(id=answer.request_id, model=answer.model, results=results[: body.top_n],
                              usage=answer.usage)

    return await serve_pooling(raw, state, body, "rerank", body.query, work, respond)
