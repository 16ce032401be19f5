"""The registry's errors: each message names what was asked for and what exists."""
from __future__ import annotations


class RegistryError(ValueError):
    """A model, version or alias the registry does not hold, or a change it refuses; the message names what
    was asked for and what exists."""


class ChecksumMismatchError(RegistryError):
    """A registered checkpoint's weight files no longer match the SHA-256 recorded when it was registered."""
