"""Per-request bookkeeping between the engine step and the user: text, logprobs, stops, outputs."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.detokenizer import IncrementalDetokenizer
from autoglm.engine.sequence import Sequence
from autoglm.outputs import CompletionOutput, Logprob, PositionLogprobs, RequestMetrics, RequestOutput
from autoglm.engine.step_result import TokenLogprobs
from autoglm.sampling_params import SamplingParams


def to_position_logprobs(entry: TokenLogprobs, tokenizer) -> PositionLogprobs:
    """The vLLM shape: {token_id: Logprob} for the actual token and its top-N alternatives."""
    position = {entry.token_id: Logprob(entry.logprob, entry.rank, tokenizer.decode([entry.token_id]))}
    for rank, (token_id, logprob) in enumerate(entry.top, start=1):
        position.setdefault(token_id, Logprob(logprob, rank, tokenizer.decode([token_id])))
    return position


@dataclass
class CompletionState:
    """One of the request's n completions as the user sees it."""

    seq: Sequence
    detokenizer: IncrementalDetokenizer
    text: str = ""  # what has been handed out so far
    logprobs: list[PositionLogprobs] | None = None
    cumulative_logprob: float = 0.0
    finish_reason: str | None = None
    stop_reason: str | int | None = None


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

    @property
    def finished(self) -> bool:
        return all(c.finish_reason is not None for c in self.completions)

    @property
    def num_cached_tokens(self) -> int:
        return self.completions[0].seq.num_cached_tokens

    def to_output(self) -> RequestOutput:
        return RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            prompt_token_ids=self.prompt_token_ids,
            outputs=[
                CompletionOutput(
                    index=c.seq.index,
                    text=c.text,
                    token_ids=c.seq.output_token_ids,
                    cumulative_logprob=c.cumulative_logprob if c.logprobs is not None else None,
                    logprobs=list(c.logprobs) if c.logprobs is not None else None,
                    finish_reason=c.finish_reason,
                    stop_reason=c.stop_reason,
                )
                for c in self.completions
            ],
            finished=self.finished,
            metrics=self.metrics,
            prompt_logprobs=list(self.prompt_logprobs) if self.prompt_logprobs is not None else None,
            num_cached_tokens=self.num_cached_tokens,
        )
