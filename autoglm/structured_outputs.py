"""What a request's output must match: a JSON schema, any JSON object, a regex, one of a few
choices, or an EBNF grammar (vLLM's ``StructuredOutputsParams``, by the same names)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from autoglm.errors import InvalidRequestError, quote_value

KINDS = ("json", "json_object", "regex", "choice", "grammar")


@dataclass(frozen=True)
class StructuredOutputsParams:
    """Exactly one constraint. ``json`` is a schema (a dict, or its JSON text); ``json_object``
    asks for any JSON object; ``choice`` is the list of allowed completions."""

    json: dict[str, Any] | str | None = None
    json_object: bool = False
    regex: str | None = None
    choice: list[str] | tuple[str, ...] | None = None
    grammar: str | None = None

    def __post_init__(self) -> None:
        given = [kind for kind in KINDS if self._is_given(kind)]
        if len(given) != 1:
            raise InvalidRequestError(
                f"structured_outputs must set exactly one of {', '.join(KINDS)}; got "
                f"{', '.join(given) if given else 'none'}", param="structured_outputs")
        if isinstance(self.json, str):
            try:
                schema = json.loads(self.json)
            except json.JSONDecodeError as error:
                raise InvalidRequestError(f"structured_outputs.json is not valid JSON: {error}",
                                          param="structured_outputs.json") from None
            object.__setattr__(self, "json", schema)
        if self.json is not None and not isinstance(self.json, (dict, bool)):
            raise InvalidRequestError(f"structured_outputs.json must be a JSON schema (an object), got "
                                      f"{quote_value(self.json)}", param="structured_outputs.json")
        if self.choice is not None:
            if not self.choice or not all(isinstance(c, str) and c for c in self.choice):
                raise InvalidRequestError("structured_outputs.choice must be a non-empty list of non-empty "
                                          f"strings, got {quote_value(self.choice)}",
                                          param="structured_outputs.choice")
            object.__setattr__(self, "choice", tuple(self.choice))
        for name in ("regex", "grammar"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise InvalidRequestError(f"structured_outputs.{name} must be a non-empty string, got "
                                          f"{quote_value(value)}", param=f"structured_outputs.{name}")

    def _is_given(self, kind: str) -> bool:
        value = getattr(self, kind)
        return value is not False if kind == "json_object" else value is not None

    @property
    def kind(self) -> str:
        return next(kind for kind in KINDS if self._is_given(kind))

    def cache_key(self) -> str:
        """The same constraint always gives the same key (schemas with their keys sorted), so a
        compiled grammar is reused across requests."""
        value = getattr(self, self.kind)
        return f"{self.kind}:{json.dumps(value, sort_keys=True, separators=(',', ':'))}"
