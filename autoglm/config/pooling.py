"""The pooling settings an engine reads: whether it generates or pools, and how a pooled vector is made."""
from __future__ import annotations

from dataclasses import dataclass

RUNNERS = ("auto", "generate", "pooling")
POOLING_TYPES = ("LAST", "MEAN", "CLS")


@dataclass(frozen=True)
class PoolingConfig:
    """``runner`` 'auto' pools for a checkpoint that says it embeds or classifies and generates otherwise.
    ``pooling_type`` None takes the checkpoint's (sentence-transformers' 1_Pooling), else LAST.
    ``classifier_from_token`` (two tokens, vLLM's ``["no", "yes"]``) scores a causal LM as the logit of the
    second token minus that of the first at the prompt's last position (Qwen3-Reranker's form).
    ``matryoshka_dimensions`` the embedding sizes a request may truncate to (None: the checkpoint's, if any)."""

    runner: str = "auto"
    pooling_type: str | None = None
    normalize: bool = True
    classifier_from_token: tuple[str, ...] | None = None
    matryoshka_dimensions: tuple[int, ...] | None = None
    max_pooling_inputs: int = 2048
