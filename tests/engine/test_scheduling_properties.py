"""Random interleavings of adds, aborts and steps over tiny KV pools, from several tenants: every
request finishes or is refused, outputs are exactly what the scripted model dictates, no tenant
runs past its cap, and the pool and the fair share's books end empty."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoglm.engine.sched.fair_share import tenant_id
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sequence import SequenceStatus, TenantTag
from autoglm.outputs import RequestOutput, add_delta
from autoglm.sampling_params import SamplingParams
from tests.engine.scripted_engine import prompt_logprob, scripted_engine

MAX_CONTEXT_LEN = 24
MAX_DRAIN_STEPS = 2000  # far more than any drawn workload needs: only a stuck scheduler reaches it


@dataclass
class Add:
    prompt: list[int]
    n: int
    priority: int
    prompt_logprobs: int | None
    max_tokens: int
    tenant: TenantTag | None


@dataclass
class Abort:
    pick: int  # which live request, modulo their number


@dataclass
class Steps:
    count: int


adds = st.builds(
    Add,
    prompt=st.lists(st.integers(10, 12), min_size=1, max_size=16),  # few distinct tokens: shared prefixes
    n=st.integers(1, 4),
    priority=st.integers(-2, 2),
    prompt_logprobs=st.sampled_from([None, None, 0, 1]),
    max_tokens=st.integers(1, 10),
    tenant=st.sampled_from([None, TenantTag("a"), TenantTag("b", weight=3.0), TenantTag("c", cache_salt="a")]),
)
operations = st.lists(
    st.one_of(adds, adds, adds, st.builds(Abort, st.integers(0, 99)), st.builds(Steps, st.integers(1, 4))),
    min_size=6, max_size=40,
)


@st.composite
def engines(draw) -> LLMEngine:
    block_size = draw(st.sampled_from([1, 2, 4]))
    paged = draw(st.booleans())
    chunked = draw(st.booleans())
    context_blocks = MAX_CONTEXT_LEN // block_size  # the contiguous layout reserves this many per sequence
    return scripted_engine(
        num_blocks=draw(st.integers(context_blocks // 3 if paged else context_blocks, context_blocks + 4)),
        block_size=block_size,
        max_context_len=MAX_CONTEXT_LEN,
        use_paged_attention=paged,
        enable_prefix_caching=draw(st.booleans()),
        enable_chunked_prefill=chunked,
        max_num_seqs=draw(st.integers(1, 5)),
        max_num_seqs_per_tenant=draw(st.none() | st.integers(1, 3)),
        # Without chunking every prompt must fit one step (the engine's setup insists on it).
        max_num_batched_tokens=draw(st.integers(2, 32)) if chunked else MAX_CONTEXT_LEN,
    )


class Driver:
    """Applies operations to an engine, checking the scheduler's promises at every step."""

    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self.accepted: dict[str, Add] = {}
        self.aborted: set[str] = set()
        self.outputs: dict[str, RequestOutput] = {}  # each request's deltas added up
        self.num_added = 0

    def add(self, op: Add) -> None:
        self.num_added += 1
        request_id = str(self.num_added)
        manager = self.engine.block_manager
        fits = (len(op.prompt) + op.max_tokens <= MAX_CONTEXT_LEN
                and manager.max_blocks_per_seq(len(op.prompt) + op.max_tokens) <= manager.num_blocks)
        params = SamplingParams(n=op.n, max_tokens=op.max_tokens, prompt_logprobs=op.prompt_logprobs)
        try:
            self.engine.add_request(request_id, op.prompt, params, priority=op.priority, tenant=op.tenant)
        except ValueError:
            assert not fits, f"refused a request that fits: {op}"
            assert request_id not in self.engine.requests
            return
        assert fits, f"accepted a request that can never fit: {op}"
        self.accepted[request_id] = op

    def abort(self, op: Abort) -> None:
        live = sorted(self.engine.requests)
        if live:
            victim = live[op.pick % len(live)]
            assert self.engine.abort_request(victim)
            self.aborted.add(victim)

    def step(self) -> None:
        scheduler, runner = self.engine.scheduler, self.engine.runner
        idle_with_work = not scheduler.running and bool(scheduler.waiting)
        decodes = [seq for seq in scheduler.running if seq.num_tokens - seq.num_computed_tokens == 1]
        forward_passes = runner.num_steps
        for delta in self.engine.step():
            add_delta(self.outputs, delta.request_id, delta)
        self.engine.block_manager.check_invariants()
        assert all(not seq.block_table for seq in scheduler.waiting), "a waiting sequence holds blocks"
        if idle_with_work:
            assert runner.num_steps == forward_passes + 1, "nothing ran although a request was waiting"
        cap = scheduler.max_num_seqs_per_tenant
        if cap is not None:
            running = Counter(tenant_id(seq) for seq in scheduler.running if seq.tenant is not None)
            assert all(count <= cap for count in running.values()), f"a tenant runs past its cap of {cap}"
        if len(decodes) <= scheduler.max_num_batched_tokens:
            skipped = [seq for seq in decodes if seq not in runner.last_seqs and seq.status is SequenceStatus.RUNNING]
            assert not skipped, "a running decode waited a step"

    def drain(self) -> None:
        for _ in range(MAX_DRAIN_STEPS):
            if not self.engine.has_unfinished_requests():
                return
            self.step()
        raise AssertionError(f"requests {sorted(self.engine.requests)} unfinished after {MAX_DRAIN_STEPS} steps")


def assert_scripted_output(engine: LLMEngine, op: Add, output: RequestOutput) -> None:
    """Each completion is the scripted continuation; prompt logprobs cover each prompt position once."""
    assert [c.index for c in output.outputs] == list(range(op.n))
    for completion in output.outputs:
        expected, tokens = [], list(op.prompt)
        for _ in range(op.max_tokens):
            tokens.append(engine.runner.next_token(tokens, completion.index))
            expected.append(tokens[-1])
        assert completion.token_ids == expected and completion.finish_reason == "length"
    if op.prompt_logprobs is None:
        assert output.prompt_logprobs is None
        return
    assert len(output.prompt_logprobs) == len(op.prompt)
    assert output.prompt_logprobs[0] is None
    for position, entry in enumerate(output.prompt_logprobs[1:], start=1):
        assert entry[op.prompt[position]].logprob == prompt_logprob(position)


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(engine=engines(), ops=operations)
def test_random_interleavings_finish_every_request_and_leave_the_pool_whole(engine, ops):
    driver = Driver(engine)
    for op in ops:
        if isinstance(op, Add):
            driver.add(op)
        elif isinstance(op, Abort):
            driver.abort(op)
        else:
            for _ in range(op.count):
                driver.step()
    driver.drain()
    for request_id, op in driver.accepted.items():
        if request_id not in driver.aborted:
            assert_scripted_output(engine, op, driver.outputs[request_id])
    manager = engine.block_manager
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks
    manager.check_invariants()
    assert not engine.scheduler.policy._unfinished, "the fair share still counts a finished sequence as work"
