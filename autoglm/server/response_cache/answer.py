"""A request's answer as the engine delivered it, step by step, in a form a cache can keep as bytes.

Keeping the steps (not only the whole) lets a streamed hit go out in the chunks a live stream has, through
the same stream writer. JSON, not pickle: a shared Redis must never be able to run code in the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import BaseModel, ConfigDict

from autoglm.outputs import CompletionOutput, PositionLogprobs, RequestOutput


@dataclass
class PromptRecord:
    """What every step of one prompt repeats, kept once."""

    prompt: str | None
    prompt_token_ids: list[int]
    num_cached_tokens: int


@dataclass
class StepRecord:
    prompt_index: int
    outputs: list[CompletionOutput]
    finished: bool
    prompt_logprobs: list[PositionLogprobs | None] | None = None


@dataclass
class CachedAnswer:
    prompts: dict[int, PromptRecord] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)

    def note(self, prompt_index: int, delta: RequestOutput) -> None:
        """Add one delta, copied: its reader folds later deltas into it in place."""
        self.prompts[prompt_index] = PromptRecord(delta.prompt, delta.prompt_token_ids, delta.num_cached_tokens)
        outputs = [replace(completion, token_ids=list(completion.token_ids),
                           logprobs=None if completion.logprobs is None else list(completion.logprobs))
                   for completion in delta.outputs]
        self.steps.append(StepRecord(prompt_index, outputs, delta.finished, delta.prompt_logprobs))


class _StoredAnswer(BaseModel):
    # A log-prob may be -inf; JSON has no word for it, so it is written as -Infinity.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    answer: CachedAnswer


def encode_answer(answer: CachedAnswer) -> bytes:
    return _StoredAnswer(answer=answer).model_dump_json().encode()


def decode_answer(data: bytes) -> CachedAnswer:
    return _StoredAnswer.model_validate_json(data).answer
