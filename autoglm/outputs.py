"""What the engine hands back for each request, in the shape vLLM users know."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import torch


@dataclass
class Logprob:
    """A token's log-probability under the model, and its rank among all tokens (1 = most likely)."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# One entry per token position: the token actually there plus the top-N alternatives.
PositionLogprobs = dict[int, Logprob]


@dataclass
class RequestMetrics:
    """Wall-clock timestamps (time.time()) of a request's life."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None


@dataclass
class CompletionOutput:
    """One generated continuation (a request with n > 1 has n of them)."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None = None
    logprobs: list[PositionLogprobs] | None = None
    finish_reason: str | None = None  # "stop", "length" or "abort"; None while running
    stop_reason: str | int | None = None  # the stop string or stop token that ended it

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def add(self, delta: CompletionOutput) -> None:
        """Append this completion's next delta; the running sum and the finish come from the later one."""
        self.text += delta.text
        self.token_ids.extend(delta.token_ids)
        if delta.logprobs is not None:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(delta.logprobs)
        self.cumulative_logprob = delta.cumulative_logprob
        self.finish_reason, self.stop_reason = delta.finish_reason, delta.stop_reason


@dataclass
class RequestOutput:
    """What one request produced: with ``RequestOutputKind.DELTA`` only what is new since its last
    output (the completions that advanced, their new tokens, text and log-probs; the prompt's
    log-probs once, when all are scored), with ``CUMULATIVE`` everything so far, with ``FINAL_ONLY``
    everything, once it has finished. ``finished`` once every completion ended."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    error: str | None = field(default=None)

    def add(self, delta: RequestOutput) -> None:
        """Fold the request's next delta into this output: deltas added up in order give the whole."""
        completions = {completion.index: completion for completion in self.outputs}
        for completion in delta.outputs:
            if completion.index in completions:
                completions[completion.index].add(completion)
            else:
                self.outputs.append(completion)
        self.outputs.sort(key=lambda completion: completion.index)
        if delta.prompt_logprobs is not None:
            self.prompt_logprobs = delta.prompt_logprobs
        self.finished = delta.finished
        self.metrics = delta.metrics
        self.num_cached_tokens = delta.num_cached_tokens


Key = TypeVar("Key")


def add_delta(outputs: dict[Key, RequestOutput], key: Key, delta: RequestOutput) -> None:
    """Fold `delta` into ``outputs[key]``; the first delta of a request becomes that entry."""
    whole = outputs.get(key)
    if whole is None:
        outputs[key] = delta
    else:
        whole.add(delta)


@dataclass
class PoolingOutput:
    """What a pooling request produced: a float32 vector (an embedding, a classifier's logits, a pair's score)."""

    data: torch.Tensor


@dataclass
class PoolingRequestOutput:
    """One pooling request's result, handed out once, when its prompt has been read (``finished`` then)."""

    request_id: str
    outputs: PoolingOutput
    prompt_token_ids: list[int]
    finished: bool
    metrics: RequestMetrics | None = None
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    error: str | None = field(default=None)


@dataclass
class EmbeddingRequestOutput:
    """A pooling output read as an embedding (vLLM's view)."""

    request_id: str
    embedding: list[float]
    prompt_token_ids: list[int]

    @classmethod
    def from_base(cls, output: PoolingRequestOutput) -> EmbeddingRequestOutput:
        return cls(output.request_id, output.outputs.data.tolist(), output.prompt_token_ids)


@dataclass
class ClassificationRequestOutput:
    """A pooling output read as a classifier's answer: its logits and their softmax (vLLM's view)."""

    request_id: str
    logits: list[float]
    probs: list[float]
    prompt_token_ids: list[int]

    @classmethod
    def from_base(cls, output: PoolingRequestOutput) -> ClassificationRequestOutput:
        data = output.outputs.data
        return cls(output.request_id, data.tolist(), torch.softmax(data, dim=-1).tolist(), output.prompt_token_ids)


@dataclass
class ScoringRequestOutput:
    """A pooling output read as the relevance score of a pair (vLLM's view)."""

    request_id: str
    score: float
    prompt_token_ids: list[int]

    @classmethod
    def from_base(cls, output: PoolingRequestOutput) -> ScoringRequestOutput:
        return cls(output.request_id, float(output.outputs.data.reshape(-1)[0]), output.prompt_token_ids)
