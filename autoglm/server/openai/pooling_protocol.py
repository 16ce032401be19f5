"""Bodies of the pooling routes: OpenAI's embeddings, Jina's and Cohere's rerank, vLLM's score."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from autoglm.server.openai.protocol import APIModel

# One input (text or token ids) or a batch of them, as OpenAI's embeddings take it.
EmbeddingInput = str | list[str] | list[int] | list[list[int]]


class PoolingRequest(APIModel):
    """Fields every pooling route shares; vLLM's extras ``truncate_prompt_tokens`` and ``priority``."""

    model: str | None = None
    user: str | None = None
    truncate_prompt_tokens: int | None = None
    priority: int = 0


class EmbeddingRequest(PoolingRequest):
    input: EmbeddingInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None


class RerankDocument(APIModel):
    text: str


class RerankRequest(PoolingRequest):
    query: str
    documents: list[str | RerankDocument]
    top_n: int | None = None
    return_documents: bool = True


class ScoreRequest(PoolingRequest):
    text_1: str | list[str]
    text_2: str | list[str]


class PoolingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str  # base64: the little-endian float32 bytes


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: PoolingUsage


class RerankResult(BaseModel):
    index: int
    relevance_score: float
    document: RerankDocument | None = None


class RerankResponse(BaseModel):
    id: str
    model: str
    results: list[RerankResult]
    usage: PoolingUsage


class ScoreData(BaseModel):
    object: Literal["score"] = "score"
    index: int
    score: float


class ScoreResponse(BaseModel):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[ScoreData]
    usage: PoolingUsage
