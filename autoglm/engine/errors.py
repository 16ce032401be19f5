"""Errors the engine raises that callers tell apart from other bad input."""
from __future__ import annotations

from autoglm.errors import InvalidRequestError


class ContextLengthExceededError(InvalidRequestError):
    """The prompt, or the prompt plus max_tokens, does not fit in the model's context."""


class EngineBrokenError(RuntimeError):
    """The engine cannot step again: a tensor-parallel worker process died, or a step failed part-way
    across the ranks, which leaves them out of step. Only a new engine serves again."""


class RequestsFailedError(RuntimeError):
    """A step failed and these requests caused it: they have ended (aborted), every other request goes
    on from where it was."""

    def __init__(self, request_ids: list[str], cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.request_ids = request_ids
