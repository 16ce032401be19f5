"""Per-request bookkeeping between the engine step and the user: text, logprobs, stops, what was sent."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.detokenizer import IncrementalDetokenizer
from autoglm.engine.sequence import Sequence
from autoglm.outputs import PositionLogprobs, RequestMetrics
from autoglm.sampling_params import SamplingParams


@dataclass
class CompletionState:
    """One of the request's n completions: everything it produced, and how much of that was handed out."""

    seq: Sequence
    detokenizer: IncrementalDetokenizer
    text_pieces: list[str] = field(default_factory=list)  # joined only when handed out
    logprobs: list[PositionLogprobs] | None = None  # None: the request asked for no log-probs
    num_tokens_sent: int = 0
    num_text_pieces_sent: int = 0
    cumulative_logprob: float = 0.0
    finish_reason: str | None = None
    stop_reason: str | int | None = None

    @property
    def has_unsent_tokens(self) -> bool:
        return self.seq.num_output_tokens > self.num_tokens_sent

    def mark_sent(self) -> None:
        self.num_tokens_sent = self.seq.num_output_tokens
        self.num_text_pieces_sent = len(self.text_pieces)


@dataclass
class RequestState:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    metrics: RequestMetrics
    completions: list[CompletionState]
    pending_children: list[Sequence] = field(default_factory=list)  # n > 1: wait for the prompt's blocks
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    prompt_logprobs_sent: bool = False

    @property
    def finished(self) -> bool:
        return all(c.finish_reason is not None for c in self.completions)

    @property
    def num_cached_tokens(self) -> int:
        return self.completions[0].seq.num_cached_tokens

    @property
    def prompt_logprobs_ready(self) -> bool:
        """Every prompt position is scored: a preemption may still restart an incomplete list."""
        return self.prompt_logprobs is not None and len(self.prompt_logprobs) >= len(self.prompt_token_ids)
