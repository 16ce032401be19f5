"""The target's final hidden states, kept per sequence from its steps until the MTP layer has read them.

The MTP layer reads the state the target computed at each position, and the target computes each position once:
these rows are the only source of them. A step that recomputes positions (a rejected proposal's, or everything
after a preemption) replaces what was kept from there on. A sequence missing from a step is forgotten: it
finished or was preempted, or the scheduler passed over it, which costs it one step without proposals.
A sequence that is never proposed for (a constrained one) keeps a row per token while it runs, far less than its
K/V across every layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.step_plan import StepPlan


@dataclass
class HiddenRun:
    """The target's hidden states of positions ``first .. first + len(rows) - 1`` of one sequence."""

    first: int
    rows: torch.Tensor  # [n, hidden]

    @property
    def end(self) -> int:
        return self.first + int(self.rows.shape[0])

    def since(self, position: int) -> torch.Tensor:
        return self.rows[position - self.first :]


class TargetHiddenStates:
    """A runner's hidden-state sink (``ModelRunner.hidden_states_sink``): runs by sequence id."""

    def __init__(self) -> None:
        self.runs: dict[int, HiddenRun] = {}

    def __call__(self, plan: StepPlan, hidden: torch.Tensor) -> None:
        starts = plan.cu_seqlens_q()
        first_positions = plan.positions[starts[:-1]].tolist() if plan.query_lens else []
        kept: dict[int, HiddenRun] = {}
        for row, seq_id in enumerate(plan.row_ids):
            # A copy: a captured decode graph writes its next step over ``hidden``.
            rows = hidden[starts[row] : starts[row + 1]].clone()
            kept[seq_id] = self._extended(self.runs.get(seq_id), first_positions[row], rows)
        self.runs = kept

    @staticmethod
    def _extended(run: HiddenRun | None, first: int, rows: torch.Tensor) -> HiddenRun:
        """``run`` with ``rows`` written from position ``first`` on, or ``rows`` alone where they do not join it."""
        if run is None or not run.first <= first <= run.end:
            return HiddenRun(first, rows)
        return HiddenRun(run.first, torch.cat([run.rows[: first - run.first], rows]))

    def drop_before(self, seq_id: int, position: int) -> None:
        """Forget the states of a sequence's positions before ``position``: read, and not to be read again."""
        run = self.runs.get(seq_id)
        if run is not None and run.first < position:
            self.runs[seq_id] = HiddenRun(position, run.since(position))
