"""A sequence: the unit the scheduler and block manager work on (a request has n of them)."""
from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field

from autoglm.engine.pooling.pooled_prompt import PooledPrompt
from autoglm.engine.prompt_images import PromptVision
from autoglm.engine.structured_output import SequenceConstraint
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.lora_adapter import LoRAAdapter
from autoglm.sampling_params import SamplingParams

_sequence_counter = itertools.count()

PENDING_TOKEN = -1  # a token sampled by a step in flight, its id not yet read back (never a vocabulary id)


@dataclass(frozen=True)
class TenantTag:
    """Whom a request is served for: the tenant's id, its weight in the fair share between
    tenants (see :class:`~autoglm.engine.sched.fair_share.FairSharePolicy`), and the salt of the
    prefix cache it sees: tenants share cached blocks only under the same ``cache_salt``; None
    gives the tenant a cache of its own, which no ``cache_salt`` can name."""

    id: str
    weight: float = 1.0
    cache_salt: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise InvalidRequestError(f"tenant {quote_value(self.id)}: weight must be a finite number above 0, "
                                      f"got {quote_value(self.weight)}")

    @property
    def salt(self) -> str:
        return f"tenant:{self.id}" if self.cache_salt is None else f"shared:{self.cache_salt}"


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """One prompt and its growing continuation, with the KV blocks that hold its context.

    ``token_ids`` holds prompt then output tokens; ``num_computed_tokens`` of them have K/V
    in the cache. After a preemption the count drops to zero and the whole sequence is
    recomputed (its output so far is kept).

    Of a request's n completions the first reads the prompt; the others (``parent`` set)
    join once it has, taking its prompt blocks rather than computing them again. Only the
    first scores the prompt when prompt logprobs are asked for.

    A constrained sequence's ``constraint`` (its grammar, its thinking) has accepted exactly its
    output tokens: a preemption keeps both, so recompute goes on from the same place in each.
    """

    request_id: str
    index: int  # which of the request's n completions
    token_ids: list[int]
    num_prompt_tokens: int
    params: SamplingParams
    max_tokens: int  # resolved against the context length
    arrival_time: float
    priority: int = 0
    tenant: TenantTag | None = None  # None: the one implicit tenant of a server without keys, or offline
    cache_salt: bytes = b""  # mixed into its block hashes (see block_manager.salt_bytes)
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache at first admission
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[bytes] = field(default_factory=list)  # hashes of the full blocks, in order
    num_published_blocks: int = 0  # leading blocks already offered to the prefix cache
    num_preemptions: int = 0
    seed: int = 0  # every draw of this completion derives from it (see the engine's _sequence_seed)
    parent: Sequence | None = field(default=None, repr=False)  # n > 1: the completion that read the prompt
    constraint: SequenceConstraint | None = field(default=None, repr=False)  # what limits its tokens; None: free
    vision: PromptVision | None = field(default=None, repr=False)  # its prompt's images; None: text alone
    adapter: LoRAAdapter | None = field(default=None, repr=False)  # the LoRA adapter it runs with; None: the base
    queued_step: int | None = None  # scheduler step at which the request was first queued
    # token_ids ends with PENDING_TOKEN, standing for the token a launched step sampled but the engine has
    # not read yet (async scheduling); the next plan defers that input to the device.
    last_token_pending: bool = False
    pooled: PooledPrompt | None = field(default=None, repr=False)  # a pooling request's; None: it generates
    seq_id: int = field(default_factory=lambda: next(_sequence_counter))
    needs_prompt_logprobs: bool = field(init=False)  # prompt positions are still to be scored

    def __post_init__(self) -> None:
        scores_prompt = self.params.prompt_logprobs is not None and self.parent is None
        self.needs_prompt_logprobs = scores_prompt and self.num_prompt_tokens > 1

    @property
    def adapter_digest(self) -> bytes:
        """Its adapter's content identity, which its block hashes mix in; empty for the base model."""
        return b"" if self.adapter is None else self.adapter.digest

    @property
    def lora_int_id(self) -> int | None:
        return None if self.adapter is None else self.adapter.request.lora_int_id

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def pools_every_position(self) -> bool:
        """A pooling sequence whose vector reads every prompt position's hidden state (MEAN, CLS), not the last alone."""
        return self.pooled is not None and self.pooled.reads_every_position

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def add_pending_token(self) -> None:
        """Count the token a launched step is sampling for this sequence before its id is known."""
        self.token_ids.append(PENDING_TOKEN)
        self.last_token_pending = True

    def append_token(self, token_id: int) -> None:
        """A sampled token: it takes the pending token's place, or extends the sequence."""
        if self.last_token_pending:
            self.token_ids[-1] = token_id
            self.last_token_pending = False
        else:
            self.token_ids.append(token_id)

    @property
    def pending_token_is_last(self) -> bool:
        """Its pending token is its max_tokens-th: it finishes when that token arrives, so no step need
        compute it. (A request's max_tokens is resolved to fit the context, so this covers both lengths.)"""
        return self.last_token_pending and self.num_output_tokens >= self.max_tokens
