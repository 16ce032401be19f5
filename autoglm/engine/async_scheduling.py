"""Async scheduling: step N+1 is scheduled and launched before step N's tokens are read.

Step N+1 is planned as if every sequence step N samples already had its token (a pending token,
filled in on the device from step N's samples), so the CPU schedules, builds and launches it while
the device still runs step N; then step N's tokens are read and processed. A sequence that step N
finishes has its row in step N+1 discarded, and nothing of that row is kept: its blocks were freed
at the finish, and the block holding the discarded token was never full of kept tokens, so it was
never published to the prefix cache.

Some requests need each token on the host before the next step is planned, and their steps run one
at a time: a grammar masks the next token by the tokens before it, a thinking budget forces the end
token by the thinking tokens so far, prompt log-probs restart when a preemption (made while scheduling)
falls on a step not yet read, and penalties count the output tokens themselves. A thinking budget holds
a request only until each of its sequences has reached its answer, where nothing more is forced.
Speculative decoding proposes from the tokens so far, so it never overlaps.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import torch

from autoglm.engine.plan_builder import PlannedStep
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sequence import Sequence
from autoglm.engine.structured_output import ThinkingState
from autoglm.runner.pending_output import PendingStepOutput
from autoglm.sampling_params import SamplingParams


def async_scheduling_enabled(setting: bool | Literal["auto"], device: torch.device) -> bool:
    """The ``async_scheduling`` setting resolved: 'auto' overlaps on CUDA only, where a step's launch
    returns before the device has run it; on a CPU the step is done when its launch returns."""
    return device.type == "cuda" if setting == "auto" else setting


def needs_synchronous_steps(params: SamplingParams) -> bool:
    """Whether a request's next step can be planned only once its last token is on the host, from its start."""
    budgeted = params.thinking is not None and ThinkingState(params.thinking).counts_down
    return _reads_each_token(params) or budgeted


def overlaps_again(params: SamplingParams, seqs: Iterable[Sequence]) -> bool:
    """Whether a request that needed synchronous steps no longer does: only its thinking budget did, and
    each of its sequences has finished or reached its answer."""
    return not _reads_each_token(params) and all(
        seq.is_finished or seq.constraint is None or not seq.constraint.reads_each_token for seq in seqs)


def _reads_each_token(params: SamplingParams) -> bool:
    """What needs each token on the host for the request's whole life: a grammar, prompt log-probs, penalties."""
    penalised = (params.repetition_penalty != 1.0 or params.frequency_penalty != 0.0
                 or params.presence_penalty != 0.0)
    return params.structured_outputs is not None or params.prompt_logprobs is not None or penalised


@dataclass
class LaunchedStep:
    """A step on the device, and what the engine needs to take in its output."""

    batch: ScheduledBatch
    planned: PlannedStep
    pending: PendingStepOutput
    proposals: dict[Sequence, list[int]] = field(default_factory=dict)

    @property
    def is_void(self) -> bool:
        """Every sequence it computes for has finished since its launch, so its output would all be discarded."""
        return all(seq.is_finished for seq in self.batch.seqs)

    def advance(self) -> None:
        """Count the step's tokens as computed and each sampled sequence's coming token as pending, so
        the next step can be scheduled; rows of sequences finished since the launch are discarded."""
        for seq, num_new in zip(self.batch.seqs, self.batch.num_new_tokens):
            if not seq.is_finished:
                seq.num_computed_tokens += num_new
        for seq in dict.fromkeys(self.planned.sampled_seqs):  # one pending token, whatever the proposals
            if not seq.is_finished:
                seq.add_pending_token()
