"""POST /v1/embeddings: text or token ids in, one vector each out, in OpenAI's shape (floats, or base64 of their
little-endian float32 bytes, as OpenAI's client decodes them)."""
from __future__ import annotations

import base64

import torch
from fastapi import APIRouter, Request, Response

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.tokenize import Prompt
from autoglm.pooling_params import PoolingParams
from autoglm.server.dependencies import State
from autoglm.server.openai.pooling import PooledAnswer, PoolingWork, serve_pooling
from autoglm.server.openai.pooling_protocol import EmbeddingData, EmbeddingInput, EmbeddingRequest, EmbeddingResponse
from autoglm.server.state import ServerState
from autoglm.server.versions.served_version import ServedVersion

router = APIRouter()


@router.post("/v1/embeddings")
async def embeddings(body: EmbeddingRequest, raw: Request, state: ServerState = State) -> Response:
    async def work(served: ServedVersion, model: PoolingModel) -> PoolingWork:
        return PoolingWork(embedding_inputs(body.input), PoolingParams(
            task="embed", dimensions=body.dimensions, truncate_prompt_tokens=body.truncate_prompt_tokens))

    def respond(answer: PooledAnswer) -> EmbeddingResponse:
        data = [EmbeddingData(index=index, embedding=encoded(output.outputs.data, body.encoding_format))
                for index, output in enumerate(answer.outputs)]
        return EmbeddingResponse(data=data, model=answer.model, usage=answer.usage)

    return await serve_pooling(raw, state, body, "embd", body.input, work, respond)


def embedding_inputs(value: EmbeddingInput) -> list[Prompt]:
    """One input or a batch, always as a list: a list of ints is one input's token ids."""
    if isinstance(value, str):
        return [value]
    if value and all(isinstance(item, int) for item in value):
        return [value]
    return list(value)


def encoded(vector: torch.Tensor, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(vector.to(torch.float32).numpy().astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
