"""A sequence's thinking state, and its constraint joining it to a grammar, token by token (no model)."""
from __future__ import annotations

import pytest
import torch

from autoglm.engine.structured_output import (
    OutputPhase,
    SequenceConstraint,
    ThinkingState,
    build_token_bitmask,
    new_constraint,
)
from autoglm.engine.structured_output.bitmask import token_bit
from autoglm.thinking import ThinkingBounds, ThinkingPhase

VOCAB_SIZE = 70
START, END = 31, 63  # each the last bit of its int32 word
EOS = 2


def bounds(phase: ThinkingPhase, budget: int | None = 3) -> ThinkingBounds:
    return ThinkingBounds(start_token_id=START, end_token_id=END, phase=phase, budget=budget)


class RecordingGrammar:
    """Stands in for a GrammarState: allows ``allowed`` and EOS (its stop token), records what it accepts."""

    masks_next = True

    def __init__(self, allowed: set[int]) -> None:
        self.allowed = allowed
        self.vocab_size = VOCAB_SIZE
        self.mask_ready = True
        self.accepted: list[int] = []
        self.closed = False

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        bitmask[row] = 0
        for token_id in self.allowed | {EOS}:
            word, bit = token_bit(token_id)
            bitmask[row, word] |= bit

    def accept(self, token_id: int) -> None:
        self.accepted.append(token_id)

    def terminates(self, token_id: int) -> bool:
        return token_id == EOS

    def close(self) -> None:
        self.closed = True


def allowed_tokens(constraint: SequenceConstraint) -> set[int] | None:
    """The tokens the constraint allows next; None when its row is not masked at all."""
    bitmask = build_token_bitmask([constraint])
    if bitmask is None:
        return None
    return {token_id for token_id in range(VOCAB_SIZE) if int(bitmask[0, token_id // 32]) >> (token_id % 32) & 1}


def accept_all(state: ThinkingState | SequenceConstraint, token_ids: list[int]) -> None:
    for token_id in token_ids:
        state.accept(token_id)


@pytest.mark.parametrize("phase, expected", [(ThinkingPhase.OPEN, OutputPhase.THINKING),
                                             (ThinkingPhase.CLOSED, OutputPhase.ANSWER),
                                             (ThinkingPhase.NOT_BEGUN, OutputPhase.NOT_BEGUN)])
def test_the_first_phase_follows_the_prompt(phase, expected):
    assert ThinkingState(bounds(phase)).phase is expected


@pytest.mark.parametrize("first, expected", [(START, OutputPhase.THINKING), (5, OutputPhase.ANSWER),
                                             (END, OutputPhase.ANSWER)])
def test_the_first_token_decides_whether_the_thinking_opens(first, expected):
    state = ThinkingState(bounds(ThinkingPhase.NOT_BEGUN))
    state.accept(first)
    assert state.phase is expected and state.num_thinking_tokens == 0


def test_thinking_tokens_are_counted_until_the_end_token_and_not_after():
    state = ThinkingState(bounds(ThinkingPhase.OPEN, budget=10))
    accept_all(state, [5, START, 6])  # the start token inside the thinking is an ordinary one
    assert state.phase is OutputPhase.THINKING and state.num_thinking_tokens == 3
    accept_all(state, [END, 7, START, END, 8])  # the end token closes, then it and the start are ordinary
    assert state.phase is OutputPhase.ANSWER and state.num_thinking_tokens == 3
    assert not state.must_end and not state.counts_down and state.max_proposals is None


def test_the_budget_forces_the_end_token_once_spent():
    state = ThinkingState(bounds(ThinkingPhase.OPEN, budget=2))
    assert [state.max_proposals, state.must_end] == [1, False]
    state.accept(5)
    assert [state.max_proposals, state.must_end] == [0, False]
    state.accept(6)
    assert [state.max_proposals, state.must_end] == [0, True]


def test_no_proposals_before_the_first_token_under_a_budget_and_any_without_one():
    assert ThinkingState(bounds(ThinkingPhase.NOT_BEGUN)).max_proposals == 0
    assert ThinkingState(bounds(ThinkingPhase.NOT_BEGUN, budget=None)).max_proposals is None


def test_a_budgeted_thinking_masks_only_the_forced_token():
    constraint = new_constraint(None, ThinkingState(bounds(ThinkingPhase.NOT_BEGUN, budget=1)), VOCAB_SIZE)
    assert allowed_tokens(constraint) is None and constraint.reads_each_token
    accept_all(constraint, [START])
    assert allowed_tokens(constraint) is None and constraint.thinking.max_proposals == 0
    accept_all(constraint, [5])
    assert allowed_tokens(constraint) == {END} and constraint.mask_ready
    accept_all(constraint, [END])
    assert allowed_tokens(constraint) is None and not constraint.reads_each_token
    assert constraint.thinking.max_proposals is None


@pytest.mark.parametrize("thinking", [None, bounds(ThinkingPhase.NOT_BEGUN, budget=None),
                                      bounds(ThinkingPhase.OPEN, budget=None), bounds(ThinkingPhase.CLOSED, budget=0)])
def test_a_sequence_that_nothing_limits_has_no_constraint(thinking):
    assert new_constraint(None, None if thinking is None else ThinkingState(thinking), VOCAB_SIZE) is None


def test_a_grammar_sees_the_answer_tokens_only():
    grammar = RecordingGrammar({10, 11})
    constraint = SequenceConstraint(grammar, ThinkingState(bounds(ThinkingPhase.NOT_BEGUN, budget=2)), VOCAB_SIZE)
    assert allowed_tokens(constraint) == {10, 11, EOS, START}, "the grammar's first mask, and the start token"
    constraint.accept(START)
    grammar.mask_ready = False  # a grammar's mask does not hold back the thinking
    assert allowed_tokens(constraint) is None and constraint.mask_ready
    assert not constraint.terminates(EOS), "EOS while thinking is no grammar's stop"
    accept_all(constraint, [EOS, 12])
    assert allowed_tokens(constraint) == {END}
    constraint.accept(END)
    assert not constraint.mask_ready
    grammar.mask_ready = True
    assert allowed_tokens(constraint) == {10, 11, EOS}
    constraint.accept(10)
    assert grammar.accepted == [10] and constraint.terminates(EOS)
    constraint.close()
    assert grammar.closed


def test_an_answer_that_does_not_open_the_thinking_is_the_grammars_from_its_first_token():
    grammar = RecordingGrammar({10, 11})
    constraint = SequenceConstraint(grammar, ThinkingState(bounds(ThinkingPhase.NOT_BEGUN)), VOCAB_SIZE)
    accept_all(constraint, [11, 10])
    assert grammar.accepted == [11, 10] and constraint.thinking.phase is OutputPhase.ANSWER
