"""Errors the engine raises that callers tell apart from other bad input."""
from __future__ import annotations


class ContextLengthExceededError(ValueError):
    """The prompt, or the prompt plus max_tokens, does not fit in the model's context."""
