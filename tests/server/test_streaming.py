"""Streamed deltas: one per step that produced tokens, even while their text is held back."""
from __future__ import annotations

from autoglm.outputs import CompletionOutput, RequestMetrics, RequestOutput
from autoglm.server.streaming import DeltaTracker


def snapshot(text: str, token_ids: list[int], finish_reason: str | None = None) -> RequestOutput:
    completion = CompletionOutput(index=0, text=text, token_ids=token_ids, finish_reason=finish_reason)
    return RequestOutput(request_id="r", prompt=None, prompt_token_ids=[1], outputs=[completion],
                         finished=finish_reason is not None, metrics=RequestMetrics(arrival_time=0.0))


def test_each_step_with_new_tokens_gets_a_delta_and_held_back_text_follows():
    tracker = DeltaTracker(1)
    steps = [
        snapshot("He", [5]),
        snapshot("He", [5, 6]),  # a possible stop string: the text waits, the token does not
        snapshot("Hello", [5, 6, 7]),
        snapshot("Hello", [5, 6, 7]),  # nothing new: no delta
        snapshot("Hello!", [5, 6, 7, 8], finish_reason="length"),
    ]
    deltas = [tracker.advance(step) for step in steps]
    assert [len(step) for step in deltas] == [1, 1, 1, 0, 1]
    sent = [step[0] for step in deltas if step]
    assert [(d.text, d.token_ids) for d in sent] == [("He", [5]), ("", [6]), ("llo", [7]), ("!", [8])]
    assert [d.text_offset for d in sent] == [0, 2, 2, 5]
    assert [d.is_first for d in sent] == [True, False, False, False]
    assert sent[-1].finish_reason == "length"
    assert tracker.advance(steps[-1]) == []  # a finished choice sends nothing more
