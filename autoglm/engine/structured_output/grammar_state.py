"""One sequence's place in its grammar: which tokens may come next, advanced by each token it keeps."""
from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

import torch

from autoglm.engine.structured_output.mask_workers import MaskWorkers

if TYPE_CHECKING:
    import xgrammar


class GrammarState:
    """A grammar matcher of one sequence (each of a request's n completions has its own).

    Only tokens the sequence keeps advance it (of a thinking model's output, the answer's alone: see
    ``SequenceConstraint``), and each exactly once (the engine accepts a token as it appends it), so a
    preemption, which recomputes the sequence's KV but keeps its output tokens, leaves it where it was.
    Nothing is ever taken back: a constrained request gets no speculative proposals and no overlapped
    steps, so every token it is handed has been masked by this state.

    The matcher is touched only by jobs on ``workers``, one at a time: each computes the mask of the
    next token (the first from the grammar's start, then one per accepted token), and the sequence is
    scheduled only once it is ready, so its next token, and the next job, wait for it.
    """

    masks_next = True  # a grammar masks every token it sees (see bitmask.NextTokenMask)

    def __init__(self, compiled: xgrammar.CompiledGrammar, vocab_size: int, workers: MaskWorkers) -> None:
        import xgrammar

        self._matcher = xgrammar.GrammarMatcher(compiled)
        self._stop_token_ids = frozenset(self._matcher.stop_token_ids)
        self.vocab_size = vocab_size
        self._workers = workers
        self._next_mask: Future[torch.Tensor] = workers.submit(self._next_row)

    @property
    def mask_ready(self) -> bool:
        """Whether the mask of the next token is computed (or its job failed, raised by ``fill_bitmask``)."""
        return self._next_mask.done()

    def accept(self, token_id: int) -> None:
        """Advance past ``token_id`` and compute the mask after it, both on a worker. The step's mask
        allowed only tokens the grammar accepts, so a refused one means the mask and the matcher
        disagree: a bug, not the caller's input, raised when the next mask is read."""
        if not self._next_mask.done():
            raise RuntimeError(f"token {token_id} was accepted before the mask that allowed it was computed")
        self._next_mask = self._workers.submit(lambda: self._advance(token_id))

    def terminates(self, token_id: int) -> bool:
        """Whether taking ``token_id`` ends the grammar: a stop token, which the mask allows only once the
        grammar is complete. Nothing more may follow it, so no mask is computed after it."""
        return token_id in self._stop_token_ids

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]`` (bit ``t % 32`` of word ``t // 32``); waits
        for the mask if it is not ready (the scheduler runs only sequences whose mask is)."""
        bitmask[row] = self._next_mask.result()

    def close(self) -> None:
        """The sequence has ended: a mask job not yet started never runs; one running is left to end unread."""
        self._next_mask.cancel()

    def _advance(self, token_id: int) -> torch.Tensor:
        if not self._matcher.accept_token(token_id):
            raise RuntimeError(f"the grammar refused token {token_id}, which this step's mask allowed")
        return self._next_row()

    def _next_row(self) -> torch.Tensor:
        import xgrammar

        row = xgrammar.allocate_token_bitmask(1, self.vocab_size)
        self._matcher.fill_next_token_bitmask(row, 0)
        return row[0]
