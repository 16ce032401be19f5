"""What the runner hands back for a :class:`~autoglm.step_plan.StepPlan`: plain arrays, in plan order."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ScoredPrompt:
    """One :class:`~autoglm.step_plan.PromptScoring`'s results, one entry per scored position."""

    logprobs: list[float]  # of each target token under the raw model
    ranks: list[int]  # 1 + how many tokens the model found likelier
    top_token_ids: list[list[int]]  # empty lists when no top-N was asked
    top_logprobs: list[list[float]]


@dataclass
class StepOutput:
    """The sampled tokens of the plan's sampled rows, in ``plan.sampling`` order.

    The log-probability fields are None when no row asked for log-probs; top-N lists are as wide
    as the largest N asked, so a row reads only its own first N.
    """

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    ranks: list[int] | None = None
    top_token_ids: list[list[int]] | None = None
    top_logprobs: list[list[float]] | None = None
    prompt_logprobs: list[ScoredPrompt] = field(default_factory=list)  # one per ``plan.prompt_scoring``
    # One per ``plan.pooling``: the chunk's float32 share on the host, None where it adds nothing (see PoolingChunk).
    pooled: list[torch.Tensor | None] = field(default_factory=list)
