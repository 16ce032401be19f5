"""Per-request bookkeeping between the engine step and the user: text, logprobs, stops, outputs."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.detokenizer import IncrementalDetokenizer
from autoglm.engine.sequence import Sequence
from autoglm.outputs import CompletionOutput, Logprob, PositionLogprobs, RequestMetrics, RequestOutput
from autoglm.engine.step_result import TokenLogprobs
from autoglm.sampling_params import RequestOutputKind, SamplingParams


def to_position_logprobs(entry: TokenLogprobs) -> PositionLogprobs:
    """The vLLM shape: {token_id: Logprob} for the actual token and its top-N alternatives.

    Token texts are left for the reader to decode (the server, only for what it sends), not the engine thread.
    """
    position = {entry.token_id: Logprob(entry.logprob, entry.rank)}
    for rank, (token_id, logprob) in enumerate(entry.top, start=1):
        position.setdefault(token_id, Logprob(logprob, rank))
    return position


@dataclass
class CompletionState:
    """One of the request's n completions, and what of it has not been handed out yet."""

    seq: Sequence
    detokenizer: IncrementalDetokenizer
    unsent_text: str = ""
    unsent_logprobs: list[PositionLogprobs] | None = None  # None: the request asked for no log-probs
    num_tokens_sent: int = 0
    cumulative_logprob: float = 0.0
    finish_reason: str | None = None
    stop_reason: str | int | None = None

    @property
    def has_unsent_tokens(self) -> bool:
        return self.seq.num_output_tokens > self.num_tokens_sent

    def take_output(self) -> CompletionOutput:
        """What it produced since the last call; only the new tokens are copied."""
        first_unsent = self.seq.num_prompt_tokens + self.num_tokens_sent
        output = CompletionOutput(
            index=self.seq.index,
            text=self.unsent_text,
            token_ids=self.seq.token_ids[first_unsent:],
            cumulative_logprob=self.cumulative_logprob if self.unsent_logprobs is not None else None,
            logprobs=self.unsent_logprobs,
            finish_reason=self.finish_reason,
            stop_reason=self.stop_reason,
        )
        self.unsent_text = ""
        self.unsent_logprobs = [] if self.unsent_logprobs is not None else None
        self.num_tokens_sent = self.seq.num_output_tokens
        return output


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

    def take_output(self) -> RequestOutput | None:
        """What the request's output kind hands out now, or None: the completions with new tokens
        and, once every prompt position is scored, the prompt's log-probs."""
        if self.params.output_kind is RequestOutputKind.FINAL_ONLY and not self.finished:
            return None
        completions = [c.take_output() for c in self.completions if c.has_unsent_tokens]
        prompt_logprobs = self._take_prompt_logprobs()
        if not completions and prompt_logprobs is None:
            return None
        return RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            prompt_token_ids=self.prompt_token_ids,
            outputs=completions,
            finished=self.finished,
            metrics=self.metrics,
            prompt_logprobs=prompt_logprobs,
            num_cached_tokens=self.num_cached_tokens,
        )

    def _take_prompt_logprobs(self) -> list[PositionLogprobs | None] | None:
        """Sent once, whole: a preemption may still restart an incomplete list."""
        scored = self.prompt_logprobs
        if self.prompt_logprobs_sent or scored is None or len(scored) < len(self.prompt_token_ids):
            return None
        self.prompt_logprobs_sent = True
        return scored
