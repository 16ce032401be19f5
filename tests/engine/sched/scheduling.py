"""Drive the scheduler and block manager without a model: sequences and simulated forward passes."""
from __future__ import annotations

from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sequence import Sequence, TenantTag
from autoglm.sampling_params import SamplingParams


def make_seq(tokens, request_id="r", max_tokens=8, priority=0, arrival=0.0, prompt_logprobs=None,
             parent: Sequence | None = None, tenant: TenantTag | None = None) -> Sequence:
    return Sequence(request_id=request_id, index=0, token_ids=list(tokens), num_prompt_tokens=len(tokens),
                    params=SamplingParams(max_tokens=max_tokens, prompt_logprobs=prompt_logprobs),
                    max_tokens=max_tokens, arrival_time=arrival, priority=priority, parent=parent, tenant=tenant)


def compute(manager: BlockManager, seq: Sequence, num_tokens: int) -> None:
    """What the engine does after a forward pass over ``num_tokens`` new tokens."""
    seq.num_computed_tokens += num_tokens
    manager.cache_full_blocks(seq)


def run_batch(scheduler: Scheduler, batch: ScheduledBatch, next_token: int = 1) -> list[Sequence]:
    """Compute a scheduled batch, append a token to each sequence that reached its end; the ones that finished."""
    finished = []
    for seq, num_new in zip(batch.seqs, batch.num_new_tokens):
        compute(scheduler.block_manager, seq, num_new)
        if seq.num_computed_tokens == seq.num_tokens:
            seq.token_ids.append(next_token)
            if seq.num_output_tokens >= seq.max_tokens:
                scheduler.finish(seq)
                finished.append(seq)
    return finished
