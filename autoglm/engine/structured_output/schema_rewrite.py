"""Rewrites a JSON schema before xgrammar compiles it, around a bug of xgrammar 0.2.

A string bounded by ``minLength``/``maxLength`` compiles to a repetition of any character but
quote, backslash, CR and LF, so a weak model writes raw control characters (U+0000-U+001F) that
JSON forbids (xgrammar issue #800). The same bounds written as a ``pattern`` go through its
JSON-aware regex path, which refuses them; so each such string is given that pattern instead.
"""
from __future__ import annotations

from typing import Any


def bounded_strings_as_patterns(schema: Any) -> Any:
    """A copy of ``schema`` whose length-bounded strings without a pattern carry ``^.{min,max}$``."""
    if isinstance(schema, list):
        return [bounded_strings_as_patterns(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    rewritten = {key: bounded_strings_as_patterns(value) for key, value in schema.items()}
    if _is_bounded_string(rewritten):
        low = rewritten.pop("minLength", 0)
        high = rewritten.pop("maxLength", "")
        rewritten["pattern"] = f"^.{{{low},{high}}}$"
    return rewritten


def _is_bounded_string(schema: dict[str, Any]) -> bool:
    bounds = [schema.get(name) for name in ("minLength", "maxLength") if name in schema]
    return (schema.get("type") == "string" and bool(bounds) and "pattern" not in schema
            and all(isinstance(bound, int) and not isinstance(bound, bool) and bound >= 0 for bound in bounds))
