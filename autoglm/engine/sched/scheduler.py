"""Iteration-level scheduling: which sequences run in the next step, and how many tokens each.

Each step has a token budget (``max_num_batched_tokens``) and a sequence cap
(``max_num_seqs``), and each tenant an optional cap of its own (``max_num_seqs_per_tenant``),
so that no tenant holds every slot however much it queues. Running sequences take the budget
first, in the order the policy gives (decodes, one token each, before prompt chunks by
default); then waiting sequences are admitted in the policy's queue order. When a running
sequence needs a block and none is free, the policy's victim is preempted: its blocks are
freed and it is recomputed later. The orders themselves live in
:mod:`autoglm.engine.sched.policies` (and the engine's, between tenants, in
:mod:`autoglm.engine.sched.fair_share`).

Waiting sequences hold no blocks. So when nothing runs the whole pool is free, and the head
of the queue, which fits the pool by itself (the engine refuses requests that cannot), is
admitted: the scheduler always makes progress, whatever the policy, but for one wait: a
constrained sequence whose next-token mask is still being computed (off the step, see
:mod:`autoglm.engine.structured_output.mask_workers`) is passed over, running or waiting, until
it is ready, so a slow grammar delays its own sequence alone.

A prompt chunk never ends inside an image's placeholders: it stops before the image, or, when it
begins at (or inside) the image, takes the image's whole run even past the token budget, so a step
may then carry more than ``max_num_batched_tokens`` tokens.
"""
from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable

from autoglm.engine.sched.adapter_turns import AdapterTurns
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.fair_share import FairSharePolicy, tenant_id
from autoglm.engine.sched.policies import PriorityPolicy, SchedulerPolicy
from autoglm.engine.sequence import Sequence, SequenceStatus


class Scheduler:
    """Keeps the waiting queue, in the policy's order as of the latest step, and the running sequences."""

    def __init__(
        self,
        block_manager: BlockManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        enable_chunked_prefill: bool = True,
        policy: SchedulerPolicy | None = None,
        max_num_seqs_per_tenant: int | None = None,
        lookahead: Callable[[Sequence], int] | None = None,
        max_loras: int | None = None,
        max_seqs_per_step: int | None = None,
    ) -> None:
        """``lookahead`` gives the proposed tokens a decoding sequence may verify in a step (speculative
        decoding); it gets slots for them only when they fit without preempting anyone. ``max_loras`` caps the
        distinct LoRA adapters of a step (see :mod:`autoglm.engine.sched.adapter_turns`); None: LoRA is off.
        ``max_seqs_per_step`` caps one step's sequences below ``max_num_seqs`` (pipeline parallelism's
        microbatches share them)."""
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        self.policy = policy or FairSharePolicy(PriorityPolicy())
        self.max_num_seqs_per_tenant = max_num_seqs_per_tenant
        self.lookahead = lookahead
        self.adapter_turns = AdapterTurns(max_loras) if max_loras is not None else None
        self._allowed_adapters: set[int] | None = None  # this step's, None: every adapter
        self.max_seqs_per_step = max_seqs_per_step or max_num_seqs
        # Sequences of steps launched and not yet read (pipeline parallelism): passed over, running or waiting.
        self.in_flight: set[Sequence] = set()
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.num_steps = 0
        self.num_preemptions = 0
        self.isolated_request: str | None = None  # set: only this request's sequences run (step_isolation)
        # Whether a waiting sequence of this request may be admitted now (see engine.kernel_switch).
        self.admits_request: Callable[[str], bool] = lambda request_id: True

    @property
    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self.running)

    def _queue_key(self, seq: Sequence) -> tuple[object, ...]:
        return self.policy.queue_key(seq, self.num_steps)

    def add(self, seq: Sequence) -> None:
        """Queue ``seq``; an n > 1 completion counts as queued when its request was."""
        if seq.queued_step is None:
            seq.queued_step = seq.parent.queued_step if seq.parent is not None else self.num_steps
        seq.status = SequenceStatus.WAITING
        self.policy.sequence_queued(seq)
        bisect.insort(self.waiting, seq, key=self._queue_key)

    def finish(self, seq: Sequence) -> None:
        """Remove a sequence for good (finished or aborted) and release its blocks."""
        queue = self.running if seq.status is SequenceStatus.RUNNING else self.waiting
        if seq in queue:
            queue.remove(seq)
        seq.status = SequenceStatus.FINISHED
        self.block_manager.free(seq)
        self.policy.sequence_finished(seq)
        if seq.constraint is not None:
            seq.constraint.close()

    def schedule(self) -> ScheduledBatch:
        """The next step: running sequences in the policy's budget order, then admissions, as budget lasts."""
        self.num_steps += 1
        batch = ScheduledBatch()
        self._allowed_adapters = self._adapter_turn([*self.running, *self.waiting])
        self._schedule_running(batch)
        if not batch.preempted:
            self._admit_waiting(batch, self.max_num_batched_tokens - batch.num_tokens)
        if not batch.seqs and self._allowed_adapters is not None:
            # The adapters whose turn it was had nothing that could run (their requests could not be admitted):
            # the running sequences' adapters take the step instead, so that no step is left empty.
            self._allowed_adapters = self._adapter_turn(self.running)
            self._schedule_running(batch)
        if self.adapter_turns is not None:
            self.adapter_turns.ran(batch.seqs, self._allowed_adapters, self.num_steps)
        self.policy.step_scheduled(batch)
        return batch

    def _adapter_turn(self, seqs: list[Sequence]) -> set[int] | None:
        """The LoRA adapters whose sequences among ``seqs`` this step may take; None: any."""
        if self.adapter_turns is None:
            return None
        return self.adapter_turns.allowed(seq for seq in seqs if not self._passed_over(seq))

    def _schedule_running(self, batch: ScheduledBatch) -> None:
        """Add running sequences to ``batch`` in the policy's budget order, preempting where blocks run short."""
        for seq in self.policy.budget_order(self.running, self.num_steps):
            budget = self.max_num_batched_tokens - batch.num_tokens
            if budget <= 0 or len(batch.seqs) >= self.max_seqs_per_step:  # an image's run may pass the budget
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted to make room for an earlier one
                continue
            if seq.pending_token_is_last:  # async scheduling: the step in flight ends it
                continue
            if self._passed_over(seq) or self._adapter_waits(seq):
                continue  # its blocks kept
            start = seq.num_computed_tokens
            num_new = _chunk_length(seq, start, min(seq.num_tokens - start, budget))
            num_lookahead = self._lookahead_slots(seq, num_new, budget)
            if num_lookahead:
                batch.add(seq, num_new, num_lookahead)
            elif self._allocate_or_preempt(seq, num_new, batch):
                batch.add(seq, num_new)

    def _lookahead_slots(self, seq: Sequence, num_new: int, budget: int) -> int:
        """Slots for a decoding sequence's proposed tokens, allocated now; 0 where none fit the budget or the pool."""
        if self.lookahead is None or num_new != 1 or seq.num_tokens - seq.num_computed_tokens != 1:
            return 0
        num_lookahead = min(self.lookahead(seq), budget - 1)
        if num_lookahead <= 0 or not self.block_manager.allocate(seq, 1 + num_lookahead):
            return 0
        return num_lookahead

    def _allocate_or_preempt(self, seq: Sequence, num_new: int, batch: ScheduledBatch) -> bool:
        """Find blocks for ``seq`` by preempting the policy's victims; False if ``seq`` itself went.

        A victim already in this step's batch leaves it, and its tokens go back to the budget.
        """
        while not self.block_manager.allocate(seq, num_new):
            victim = self.policy.preemption_victim(self.running, self.num_steps)
            if victim in batch.seqs:
                batch.remove(victim)
            self._preempt(victim)
            batch.preempted.append(victim)
            if victim is seq:
                return False
        return True

    def _passed_over(self, seq: Sequence) -> bool:
        """Whether `seq` waits this step, running or waiting: another request runs alone (step_isolation), a
        step in flight computes for it, or the mask of its next token is still being computed."""
        isolated_out = self.isolated_request is not None and seq.request_id != self.isolated_request
        return isolated_out or seq in self.in_flight or (seq.constraint is not None and not seq.constraint.mask_ready)

    def _adapter_waits(self, seq: Sequence) -> bool:
        """Whether `seq`'s LoRA adapter sits this step out: other adapters take the step's slots."""
        allowed = self._allowed_adapters
        return allowed is not None and seq.lora_int_id is not None and seq.lora_int_id not in allowed

    def _admits(self, seq: Sequence) -> bool:
        """Whether a waiting sequence may be admitted now; the one request run alone always may."""
        return seq.request_id == self.isolated_request or self.admits_request(seq.request_id)

    def requeue_running(self) -> list[Sequence]:
        """Send every running sequence back to the queue to compute its KV again from the start, a failed
        step having left it unknown; not counted as a preemption, since no block was short."""
        requeued, self.running = self.running, []
        for seq in requeued:
            self.block_manager.free(seq)
            seq.num_computed_tokens = 0
            self.add(seq)
        return requeued

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.block_manager.free(seq)
        seq.num_computed_tokens = 0
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.add(seq)

    def _admit_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        """Admit waiting sequences in queue order while budget, slots and blocks last.

        A sequence whose tenant already runs ``max_num_seqs_per_tenant`` sequences waits, and
        those behind it go on. So does a sequence whose next uncached block is still being computed
        by a running prompt, for a step or more: once those blocks are published it reads them from
        the cache rather than computing the same prefix a second time.
        """
        if not self.waiting:
            return
        self.waiting.sort(key=self._queue_key)  # a policy's keys may change from step to step
        in_flight = self._blocks_in_flight()
        running_per_tenant = Counter(tenant_id(seq) for seq in self.running)
        index = 0
        while (index < len(self.waiting) and budget > 0 and len(self.running) < self.max_num_seqs
               and len(batch.seqs) < self.max_seqs_per_step):
            seq = self.waiting[index]
            if (self._passed_over(seq) or self._adapter_waits(seq) or self._at_tenant_cap(seq, running_per_tenant)
                    or not self._admits(seq)):
                index += 1
                continue
            cached = self.block_manager.find_cached_prefix(seq)
            if len(cached) < len(seq.block_hashes) and seq.block_hashes[len(cached)] in in_flight:
                index += 1
                continue
            start = len(cached) * self.block_manager.block_size
            remaining = seq.num_tokens - start
            if not self.enable_chunked_prefill and remaining > budget:
                break
            num_new = _chunk_length(seq, start, min(remaining, budget))
            if not self.block_manager.allocate(seq, num_new, cached):
                break
            if not seq.needs_prompt_logprobs and self.block_manager.enable_prefix_caching:
                self.block_manager.record_prefix_lookup(seq.num_tokens, len(cached))
            if seq.num_preemptions == 0 and seq.num_cached_tokens == 0:
                seq.num_cached_tokens = seq.num_computed_tokens
            self.waiting.pop(index)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            running_per_tenant[tenant_id(seq)] += 1
            in_flight.update(self._unpublished_hashes(seq))
            batch.add(seq, num_new)
            budget -= num_new
            self.policy.sequence_admitted(seq, num_new)
            self.waiting[index:] = sorted(self.waiting[index:], key=self._queue_key)

    def _at_tenant_cap(self, seq: Sequence, running_per_tenant: Counter[str | None]) -> bool:
        """Its tenant runs as many sequences as one tenant may; requests without a tenant have no cap."""
        cap = self.max_num_seqs_per_tenant
        tenant = tenant_id(seq)
        return cap is not None and tenant is not None and running_per_tenant[tenant] >= cap

    def _blocks_in_flight(self) -> set[bytes]:
        """Hashes of prompt blocks that running sequences are computing but have not yet published."""
        if not self.block_manager.enable_prefix_caching:
            return set()
        return {block_hash for seq in self.running for block_hash in self._unpublished_hashes(seq)}

    @staticmethod
    def _unpublished_hashes(seq: Sequence) -> list[bytes]:
        if seq.num_computed_tokens >= seq.num_prompt_tokens:
            return []
        return seq.block_hashes[seq.num_published_blocks:]


def _chunk_length(seq: Sequence, start: int, num_new: int) -> int:
    """``num_new`` tokens of ``seq`` from index ``start``, moved so that the chunk ends inside no image's
    placeholders (see :meth:`~autoglm.engine.prompt_images.PromptVision.chunk_end`)."""
    if seq.vision is None:
        return num_new
    return seq.vision.chunk_end(start, start + num_new) - start
