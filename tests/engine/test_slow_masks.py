"""A constrained request whose mask is slow holds no one else: counted in steps, not seconds.

The masks are held back by a gate the test opens (or computed for a regex that costs xgrammar seconds
per token), and every step is checked: the unconstrained streams beside it gain a token in each one.
"""
from __future__ import annotations

import re
import threading
from collections import Counter, defaultdict

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.structured_output import GrammarState
from autoglm.structured_outputs import StructuredOutputsParams
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import make_tiny_checkpoint

pytestmark = [needs_xgrammar, pytest.mark.timeout(300)]

REGEX = r"[a-z]{2,6}@[0-9]{2,3}\.(com|org)"
# xgrammar takes seconds for this one's first mask, and several times longer for each mask after.
HOSTILE_REGEX = "(.*){1,32002}[bc]"
NUM_STREAMS = 4
STREAM_TOKENS = 8
HANG_GUARD_S = 120  # only a broken build waits this long for the gate


class MaskGate:
    """Holds every mask computation until opened, and counts the computations started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = threading.Event()
        self.started = 0
        self._start = threading.Condition()
        compute = GrammarState._next_row

        def gated(state: GrammarState):
            with self._start:
                self.started += 1
                self._start.notify_all()
            if not self.opened.wait(HANG_GUARD_S):
                raise RuntimeError("the mask gate was never opened")
            return compute(state)

        monkeypatch.setattr(GrammarState, "_next_row", gated)

    def wait_started(self, count: int) -> None:
        with self._start:
            assert self._start.wait_for(lambda: self.started >= count, HANG_GUARD_S)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    return LLM(model=str(make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))), dtype="float32",
               max_context_len=512, block_size=4)


@pytest.fixture
def gate(monkeypatch):
    gate = MaskGate(monkeypatch)
    yield gate
    gate.opened.set()  # no mask thread stays blocked past the test


def constrained(regex: str = REGEX, max_tokens: int = 40) -> SamplingParams:
    return SamplingParams(temperature=1.0, seed=5, max_tokens=max_tokens,
                          structured_outputs=StructuredOutputsParams(regex=regex))


def add_streams(engine: LLMEngine) -> list[str]:
    ids = [f"stream-{i}" for i in range(NUM_STREAMS)]
    for i, request_id in enumerate(ids):
        engine.add_request(request_id, f"{i} the quick brown fox",
                           SamplingParams(temperature=0, max_tokens=STREAM_TOKENS, ignore_eos=True))
    return ids


def step_counting_tokens(engine: LLMEngine) -> Counter[str]:
    """One step: the tokens each request gained in it."""
    return Counter({output.request_id: len(output.outputs[0].token_ids) for output in engine.step()})


def finish_all(engine: LLMEngine) -> dict[str, str]:
    texts: defaultdict[str, str] = defaultdict(str)
    while engine.has_unfinished_requests():
        for output in engine.step():
            texts[output.request_id] += output.outputs[0].text
        engine.wait_for_work()
    return dict(texts)


def test_streams_gain_a_token_every_step_while_a_constrained_mask_is_pending(llm, gate):
    engine = llm.engine
    gate.opened.set()
    engine.add_request("alone", "Hello world", constrained())
    alone = finish_all(engine)["alone"]

    gate.opened.clear()
    engine.add_request("held", "Hello world", constrained())
    streams = add_streams(engine)
    for _ in range(STREAM_TOKENS):
        gained = step_counting_tokens(engine)
        assert gained == Counter({stream: 1 for stream in streams}), "every stream gains one token, 'held' none"
    gate.opened.set()
    texts = finish_all(engine)
    assert texts["held"] == alone, "the masks, once they come, give the tokens they would have given"
    assert re.fullmatch(REGEX, alone)


def test_an_aborted_request_s_mask_jobs_stop(llm, gate):
    """One request per mask thread, each of whose first mask is held, and one more queued behind them: all
    aborted, the queued job never runs, and the held ones, let go, start no job after theirs."""
    engine = llm.engine
    workers = engine.grammars.workers
    ids = [f"aborted-{i}" for i in range(workers.num_threads + 1)]
    for request_id in ids:
        engine.add_request(request_id, "Hello world", constrained())
    gate.wait_started(workers.num_threads)  # every thread holds a job; the last request's waits in the queue
    done_before = workers.num_done
    for request_id in ids:
        engine.abort_request(request_id)
    gate.opened.set()
    workers.wait_past(done_before + workers.num_threads - 1)  # the held jobs have ended
    assert gate.started == workers.num_threads
    assert not engine.has_unfinished_requests()


def test_a_hostile_regex_holds_only_its_own_request(llm):
    """The regex of the stall report: while its first mask is being computed, the streams go on."""
    engine = llm.engine
    engine.add_request("hostile", "A", constrained(HOSTILE_REGEX, max_tokens=4))
    streams = add_streams(engine)
    for _ in range(STREAM_TOKENS):
        assert step_counting_tokens(engine) == Counter({stream: 1 for stream in streams})
    assert engine.requests["hostile"].completions[0].seq.num_output_tokens == 0
    engine.abort_request("hostile")
    assert not engine.has_unfinished_requests()
