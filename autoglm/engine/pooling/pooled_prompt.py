"""A pooling sequence's vector, built chunk by chunk as its prompt is read.

Chunked prefill splits a prompt across steps, so each step hands back only its share: MEAN a running sum of
hidden states, CLS the first row (in the chunk that starts the prompt), LAST the last row (in the chunk that
ends it). A chunk that starts the prompt again (after a preemption, which recomputes from the start) resets it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.pooling_params import PoolingParams
from autoglm.step_plan import PoolingChunk

_HEADS = {"embed": "hidden", "classify": "logits", "token_pair": "token_pair"}


@dataclass(eq=False)
class PooledPrompt:
    params: PoolingParams
    model: PoolingModel
    value: torch.Tensor | None = None

    @property
    def reads_every_position(self) -> bool:
        """Whether every prompt position's hidden state counts, so none may come from the prefix cache: the
        last token's reads only the cached K/V of the tokens before it, exactly as if they were computed."""
        return self.model.pooling_type != "LAST"

    def chunk(self, first_token: int, start: int, end: int, num_prompt_tokens: int) -> PoolingChunk:
        """What the runner reduces of the prompt positions ``start..end - 1``, at batch index ``first_token``."""
        return PoolingChunk(first_token, end - start, self.model.pooling_type, start == 0, end == num_prompt_tokens,
                            _HEADS[self.model.kind], self.model.token_pair)

    def add(self, part: torch.Tensor | None, starts_prompt: bool) -> None:
        """Fold in one chunk's share (see :class:`PoolingChunk`)."""
        if self.model.pooling_type == "MEAN":
            self.value = part if starts_prompt or self.value is None else self.value + part
        elif part is not None:
            self.value = part

    def result(self, num_prompt_tokens: int) -> torch.Tensor:
        """The request's float32 vector: the pool, cut to ``dimensions`` and normalised for an embedding; a
        pair's score through a sigmoid; a classifier's logits as they are."""
        assert self.value is not None, "a pooling sequence finished before its prompt was read"
        value = self.value / num_prompt_tokens if self.model.pooling_type == "MEAN" else self.value
        if self.model.kind == "embed":
            if self.params.dimensions is not None:
                value = value[: self.params.dimensions]
            normalize = self.model.normalize if self.params.normalize is None else self.params.normalize
            return torch.nn.functional.normalize(value, dim=-1) if normalize else value
        return torch.sigmoid(value) if self.params.task == "score" else value
