"""The one error type that means "the caller's input is wrong", as opposed to a bug in autoglm,
and how its messages quote the caller's input."""
from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

# Characters of a caller's value an error message quotes: enough to recognise it, never so
# many that a 10 MB stop string comes back as a 10 MB error.
MAX_QUOTED_CHARS = 80
QUOTE_ELISION = "..."

# An int longer than this is quoted by its size: its digits would be cut anyway, and repr() refuses
# ints of more than 4300 digits.
_MAX_QUOTED_INT_BITS = 4 * MAX_QUOTED_CHARS


class _BoundedRepr(reprlib.Repr):
    """repr() that gives up early inside big containers and long strings, so quoting a huge value
    costs little more than its quoted prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = MAX_QUOTED_CHARS
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 8

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _MAX_QUOTED_INT_BITS:
            return f"<{'-' if x < 0 else ''}{x.bit_length()}-bit integer>"
        return super().repr_int(x, level)


_BOUNDED_REPR = _BoundedRepr()


class InvalidRequestError(ValueError):
    """A parameter, prompt or request id the caller must fix; its message names what is wrong
    and what is allowed. The server answers it with 400; any other exception is a server bug
    (500). A ValueError, so callers of the offline API catch it as before.

    `param` names the request field at fault, where there is one, for the API's error body.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class LoRAAdapterError(InvalidRequestError):
    """A LoRA adapter that cannot be served: its files are bad, or it does not fit the base model or the
    engine's LoRA settings. The message names the adapter, what is wrong and what is allowed (server: 400)."""


class LoRAAdapterNotFoundError(LoRAAdapterError):
    """An adapter that is not there: its folder or files are missing, or no loaded adapter has the name (or it is
    being unloaded). The server answers 404."""


class LoRACapacityError(RuntimeError):
    """``max_cpu_loras`` adapters are loaded and every one has requests in flight, so none can make room for
    another; retry later (server: 503)."""


def quote_value(value: object) -> str:
    """`value` as an error message quotes it: its repr, cut after its first MAX_QUOTED_CHARS characters
    (then ``...``). Every message that echoes a caller's input goes through here."""
    if isinstance(value, str):
        # The string's own prefix, not reprlib's head-and-tail abbreviation of it.
        return repr(value) if len(value) <= MAX_QUOTED_CHARS else repr(value[:MAX_QUOTED_CHARS]) + QUOTE_ELISION
    text = _BOUNDED_REPR.repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS] + QUOTE_ELISION


def named_entry(table: Mapping[str, T], kind: str, key: str) -> T:
    """The entry of `table` that `key` names; a ValueError naming the `kind` of thing and the known keys
    otherwise (for settings that choose one of several implementations by name)."""
    if key not in table:
        raise ValueError(f"unknown {kind} {quote_value(key)}; known: {', '.join(table)}")
    return table[key]
