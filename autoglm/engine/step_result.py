"""The runner's arrays mapped back onto the sequences they were computed for."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.plan_builder import PlannedStep
from autoglm.engine.sequence import Sequence
from autoglm.step_output import StepOutput


@dataclass
class TokenLogprobs:
    """A token's raw-model log-probability, its rank, and the top-N alternatives."""

    token_id: int
    logprob: float | None  # None when the request asked for no logprobs
    rank: int | None = None
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class StepResult:
    """What one forward pass produced, per sequence."""

    # Each sampled sequence's draws in order: one, or one per proposed token and one after them.
    sampled: dict[Sequence, list[TokenLogprobs]] = field(default_factory=dict)
    # For sequences asking for prompt logprobs: entries for the prompt tokens this chunk scored.
    prompt_logprobs: dict[Sequence, list[TokenLogprobs]] = field(default_factory=dict)


def step_result(planned: PlannedStep, output: StepOutput) -> StepResult:
    """Each sampled position's token (with the log-probs its request asked for), each scored prompt's entries."""
    result = StepResult()
    for row, seq in enumerate(planned.sampled_seqs):
        entry = TokenLogprobs(output.token_ids[row], None)
        count = seq.params.logprobs
        if count is not None:
            entry.logprob, entry.rank = output.logprobs[row], output.ranks[row]
            entry.top = list(zip(output.top_token_ids[row][:count], output.top_logprobs[row][:count]))
        result.sampled.setdefault(seq, []).append(entry)
    for seq, scoring, scored in zip(planned.scoring_seqs, planned.plan.prompt_scoring, output.prompt_logprobs):
        result.prompt_logprobs[seq] = [
            TokenLogprobs(token_id, logprob, rank, list(zip(top_ids, top_values)))
            for token_id, logprob, rank, top_ids, top_values in zip(
                scoring.target_token_ids, scored.logprobs, scored.ranks, scored.top_token_ids, scored.top_logprobs)
        ]
    return result
