"""Errors the engine raises that callers tell apart from other bad input."""
from __future__ import annotations

from autoglm.errors import InvalidRequestError


class ContextLengthExceededError(InvalidRequestError):
    """The prompt, or the prompt plus max_tokens, does not fit in the model's context."""
