"""The runner's arrays mapped back onto the sequences they were computed for."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from autoglm.engine.plan_builder import PlannedStep
from autoglm.engine.sequence import Sequence
from autoglm.outputs import Logprob, PositionLogprobs
from autoglm.step_output import StepOutput


@dataclass
class SampledToken:
    """A drawn token and, when its request asked for them, its log-probs in the shape the caller reads."""

    token_id: int
    logprobs: PositionLogprobs | None = None

    @property
    def logprob(self) -> float:
        assert self.logprobs is not None
        return self.logprobs[self.token_id].logprob


def position_logprobs(token_id: int, logprob: float, rank: int, top: Iterable[tuple[int, float]]) -> PositionLogprobs:
    """The vLLM shape: {token_id: Logprob} for the actual token and its top-N alternatives, built once here.

    Token texts are left for the reader to decode (the server, only for what it sends), not the engine thread.
    """
    position = {token_id: Logprob(logprob, rank)}
    for top_rank, (top_id, top_logprob) in enumerate(top, start=1):
        position.setdefault(top_id, Logprob(top_logprob, top_rank))
    return position


@dataclass
class StepResult:
    """What one forward pass produced, per sequence."""

    # Each sampled sequence's draws in order: one, or one per proposed token and one after them.
    sampled: dict[Sequence, list[SampledToken]] = field(default_factory=dict)
    # For sequences asking for prompt logprobs: entries for the prompt tokens this chunk scored.
    prompt_logprobs: dict[Sequence, list[PositionLogprobs]] = field(default_factory=dict)
    # Each pooling sequence's share of its vector from this chunk (see PoolingChunk), and whether the chunk
    # started its prompt.
    pooled: dict[Sequence, tuple[torch.Tensor | None, bool]] = field(default_factory=dict)


def step_result(planned: PlannedStep, output: StepOutput) -> StepResult:
    """Each sampled position's token (with the log-probs its request asked for), each scored prompt's entries."""
    result = StepResult()
    for row, seq in enumerate(planned.sampled_seqs):
        entry = SampledToken(output.token_ids[row])
        count = seq.params.logprobs
        if count is not None:
            entry.logprobs = position_logprobs(entry.token_id, output.logprobs[row], output.ranks[row],
                                               zip(output.top_token_ids[row][:count], output.top_logprobs[row][:count]))
        result.sampled.setdefault(seq, []).append(entry)
    for seq, scoring, scored in zip(planned.scoring_seqs, planned.plan.prompt_scoring, output.prompt_logprobs):
        result.prompt_logprobs[seq] = [
            position_logprobs(token_id, logprob, rank, zip(top_ids, top_values))
            for token_id, logprob, rank, top_ids, top_values in zip(
                scoring.target_token_ids, scored.logprobs, scored.ranks, scored.top_token_ids, scored.top_logprobs)
        ]
    for seq, chunk, part in zip(planned.pooled_seqs, planned.plan.pooling, output.pooled):
        result.pooled[seq] = (part, chunk.starts_prompt)
    return result
