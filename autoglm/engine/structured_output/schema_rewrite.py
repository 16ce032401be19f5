"""Rewrites a JSON schema before xgrammar compiles it, around two faults of xgrammar 0.2.

A string bounded by ``minLength``/``maxLength`` compiles to a repetition of any character but
quote, backslash, CR and LF: a weak model then writes raw control characters (U+0000-U+001F),
which JSON forbids (xgrammar issue #800), and bytes that are not UTF-8 (surrogates, overlong
forms), which decode to several replacement characters and so break the length bound. Written
as a ``pattern`` of positive code point ranges instead, the same bounds go through xgrammar's
JSON-aware regex path, which matches only well-formed UTF-8 of those code points.
"""
from __future__ import annotations

from typing import Any

# Every code point a JSON string holds unescaped (not a control character, quote or backslash),
# less the surrogates UTF-8 cannot encode; escapes are left out, as xgrammar's own bounded strings
# do. Written as the code points themselves: xgrammar's regex knows no escape past \uFFFF.
_STRING_CHARACTER = "[ !#-\\[\\]-\ud7ff\ue000-\U0010ffff]"


def bounded_strings_as_patterns(schema: Any) -> Any:
    """A copy of ``schema`` whose length-bounded strings without a pattern carry one instead."""
    if isinstance(schema, list):
        return [bounded_strings_as_patterns(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    rewritten = {key: bounded_strings_as_patterns(value) for key, value in schema.items()}
    if _is_bounded_string(rewritten):
        low = rewritten.pop("minLength", 0)
        high = rewritten.pop("maxLength", "")
        rewritten["pattern"] = f"^{_STRING_CHARACTER}{{{low},{high}}}$"
    return rewritten


def _is_bounded_string(schema: dict[str, Any]) -> bool:
    bounds = [schema.get(name) for name in ("minLength", "maxLength") if name in schema]
    return (schema.get("type") == "string" and bool(bounds) and "pattern" not in schema
            and all(isinstance(bound, int) and not isinstance(bound, bool) and bound >= 0 for bound in bounds))
