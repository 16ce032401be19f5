"""Benchmark requests: random prompts of chosen lengths, drawn reproducibly from a seed.

A workload is a named function from :class:`WorkloadInputs` to requests, so a new kind is
one more entry in :data:`WORKLOADS`.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchRequest:
    """One request: its prompt ids and exactly how many tokens it generates (EOS is ignored)."""

    prompt_token_ids: list[int]
    max_tokens: int


@dataclass(frozen=True)
class Workload:
    name: str
    requests: list[BenchRequest]

    @property
    def prompt_tokens(self) -> int:
        return sum(len(request.prompt_token_ids) for request in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(request.max_tokens for request in self.requests)

    def check_output_lengths(self, lengths: Sequence[int], side: str) -> None:
        """Raise unless each request generated exactly its ``max_tokens``, so both sides did equal work."""
        for index, (request, length) in enumerate(zip(self.requests, lengths, strict=True)):
            if length != request.max_tokens:
                raise RuntimeError(
                    f"{side} generated {length} tokens for request {index} of workload '{self.name}' "
                    f"instead of {request.max_tokens}; the throughput comparison would be unfair"
                )


@dataclass(frozen=True)
class WorkloadInputs:
    """What every workload draws from; ``length_scale`` shrinks all lengths for quick runs."""

    num_requests: int
    token_ids: Sequence[int]  # ids a prompt may contain
    rng: random.Random
    length_scale: float = 1.0

    def scaled(self, length: int) -> int:
        return max(1, round(length * self.length_scale))


@dataclass(frozen=True)
class RandomLengths:
    """Prompt and output lengths uniform in inclusive ranges; prompt ids uniform over the usable ones."""

    prompt_len: tuple[int, int]
    output_len: tuple[int, int]

    def __call__(self, inputs: WorkloadInputs) -> list[BenchRequest]:
        requests = []
        for _ in range(inputs.num_requests):
            prompt_len = inputs.rng.randint(*map(inputs.scaled, self.prompt_len))
            output_len = inputs.rng.randint(*map(inputs.scaled, self.output_len))
            prompt = inputs.rng.choices(inputs.token_ids, k=prompt_len)
            requests.append(BenchRequest(prompt_token_ids=prompt, max_tokens=output_len))
        return requests


@dataclass(frozen=True)
class SharedPrefix:
    """One system prompt before every request's own question: the case prefix caching is for."""

    prefix_len: int
    question_len: int
    output_len: int

    def __call__(self, inputs: WorkloadInputs) -> list[BenchRequest]:
        prefix = inputs.rng.choices(inputs.token_ids, k=inputs.scaled(self.prefix_len))
        return [
            BenchRequest(
                prompt_token_ids=prefix + inputs.rng.choices(inputs.token_ids, k=inputs.scaled(self.question_len)),
                max_tokens=inputs.scaled(self.output_len),
            )
            for _ in range(inputs.num_requests)
        ]


WorkloadBuilder = Callable[[WorkloadInputs], list[BenchRequest]]

SHARED_PREFIX = "shared-prefix"
WORKLOADS: dict[str, WorkloadBuilder] = {
    "mixed": RandomLengths(prompt_len=(32, 512), output_len=(32, 256)),
    "fixed": RandomLengths(prompt_len=(128, 128), output_len=(64, 64)),
    SHARED_PREFIX: SharedPrefix(prefix_len=1024, question_len=64, output_len=64),
}
# Requests per workload unless ``--num-prompts`` says otherwise.
DEFAULT_NUM_REQUESTS = {"mixed": 64, "fixed": 64, SHARED_PREFIX: 32}


def usable_token_ids(vocab_size: int, special_ids: Collection[int]) -> list[int]:
    """Ids below ``vocab_size`` that are not special, so no prompt holds an EOS or pad token."""
    special = set(special_ids)
    return [token_id for token_id in range(vocab_size) if token_id not in special]


def build_workload(
    name: str, num_requests: int | None, token_ids: Sequence[int], seed: int, length_scale: float = 1.0
) -> Workload:
    """The requests of workload ``name`` (its default count when ``num_requests`` is None); each
    workload has its own random stream, so running one alone or after another gives the same prompts."""
    builder = WORKLOADS.get(name)
    if builder is None:
        raise ValueError(f"unknown workload '{name}'; choose one of: {', '.join(WORKLOADS)}")
    if num_requests is None:
        num_requests = DEFAULT_NUM_REQUESTS[name]
    if not token_ids:
        raise ValueError("no usable prompt token ids: every id below the vocabulary size is special")
    rng = random.Random(f"{name}:{seed}")
    return Workload(name, builder(WorkloadInputs(num_requests, token_ids, rng, length_scale)))
