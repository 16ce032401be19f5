"""Per-request settings of a pooling request (an embedding, a classification, a score), in vLLM's names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from autoglm.errors import InvalidRequestError, quote_value

PoolingTask = Literal["embed", "classify", "score"]
POOLING_TASKS: tuple[str, ...] = ("embed", "classify", "score")


@dataclass(frozen=True)
class PoolingParams:
    """What a pooling request asks for, checked on construction.

    ``task``: "embed" (a vector per prompt), "classify" (a sequence-classification model's logits) or "score"
    (one relevance logit of a pair). ``dimensions`` keeps the first N values of an embedding (Matryoshka),
    before it is normalised; ``normalize`` None takes the engine's setting. ``truncate_prompt_tokens`` keeps
    only a prompt's last N tokens (-1: as many as the context holds) instead of refusing a longer prompt.
    """

    task: PoolingTask = "embed"
    dimensions: int | None = None
    normalize: bool | None = None
    truncate_prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.task not in POOLING_TASKS:
            raise InvalidRequestError(f"task must be one of {', '.join(POOLING_TASKS)}, got {quote_value(self.task)}",
                                      param="task")
        if self.dimensions is not None and (type(self.dimensions) is not int or self.dimensions < 1):
            raise InvalidRequestError(f"dimensions must be a whole number of at least 1, got "
                                      f"{quote_value(self.dimensions)}", param="dimensions")
        if self.dimensions is not None and self.task != "embed":
            raise InvalidRequestError(f"dimensions applies to embeddings only, not to task {quote_value(self.task)}",
                                      param="dimensions")
        if self.normalize is not None and type(self.normalize) is not bool:
            raise InvalidRequestError(f"normalize must be true or false, got {quote_value(self.normalize)}",
                                      param="normalize")
        truncate = self.truncate_prompt_tokens
        if truncate is not None and (type(truncate) is not int or (truncate < 1 and truncate != -1)):
            raise InvalidRequestError(f"truncate_prompt_tokens must be -1 (the context length) or a whole number of "
                                      f"at least 1, got {quote_value(truncate)}", param="truncate_prompt_tokens")
