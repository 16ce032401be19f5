"""Score and rerank: the (query, document) pairs a request names, and each pair as the model reads it.

A sequence classifier reads a pair as its tokenizer encodes two texts; a yes/no reranker (classifier_from_token)
reads it inside Qwen3-Reranker's prompt, which asks whether the document answers the query; an embedding model
reads each text alone, and the pair's score is the cosine of their two embeddings (as vLLM scores it).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.errors import InvalidRequestError

RERANKER_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
_RERANKER_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
)
_RERANKER_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def score_pairs(text_1: str | Sequence[str], text_2: str | Sequence[str]) -> list[tuple[str, str]]:
    """vLLM's pairing: one text_1 against each text_2, or the two lists item by item (as long as each other)."""
    firsts = [text_1] if isinstance(text_1, str) else list(text_1)
    seconds = [text_2] if isinstance(text_2, str) else list(text_2)
    if not firsts or not seconds:
        raise InvalidRequestError("text_1 and text_2 must each hold at least one text")
    if not all(isinstance(text, str) for text in [*firsts, *seconds]):
        raise InvalidRequestError("text_1 and text_2 must be strings or lists of strings")
    if len(firsts) == 1:
        firsts = firsts * len(seconds)
    if len(firsts) != len(seconds):
        raise InvalidRequestError(f"text_1 has {len(firsts)} texts and text_2 {len(seconds)}; give one text_1, or as "
                                  "many as text_2")
    return list(zip(firsts, seconds))


def pair_prompt(tokenizer: PreTrainedTokenizerBase, model: PoolingModel, query: str, document: str) -> list[int]:
    """The token ids a classifier or yes/no reranker scores the pair by."""
    if model.kind == "token_pair":
        text = (f"{_RERANKER_PREFIX}<Instruct>: {RERANKER_INSTRUCTION}\n<Query>: {query}\n<Document>: {document}"
                f"{_RERANKER_SUFFIX}")
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer(query, document)["input_ids"]


def cosine_scores(first: list[torch.Tensor], second: list[torch.Tensor]) -> list[float]:
    """Each pair's cosine similarity, from the two texts' embeddings."""
    return [float(torch.nn.functional.cosine_similarity(a, b, dim=0)) for a, b in zip(first, second)]
