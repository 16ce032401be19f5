"""The metric names a PromQL expression reads, found without a PromQL parser: what is left once strings, label
matchers, ranges, grouping clauses, functions, numbers and keywords are taken out."""
from __future__ import annotations

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_LABEL_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_FUNCTION_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*\(")
_GRAFANA_VARIABLE = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
# Numbers and durations: 0.99, 1e3, 1e+3, 5m, 1h30m.
_NUMBER = re.compile(r"(?<![\w:])\.?\d[\w.]*(?:[eE][+-]\d+)?")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"})


def metric_names(expression: str) -> set[str]:
    """The metric names in `expression`, e.g. {'autoglm:x_bucket'} for
    'histogram_quantile(0.9, sum by (le) (rate(autoglm:x_bucket{a="b"}[$__rate_interval])))'."""
    text = _STRING.sub(" ", expression)
    text = _GRAFANA_VARIABLE.sub(" ", text)
    text = _LABEL_MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _FUNCTION_CALL.sub("(", text)
    text = _NUMBER.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}


def label_values_metric(query: str) -> str:
    """The metric of a Grafana variable's `label_values(METRIC, LABEL)` query."""
    match = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*\w+\s*\)\s*", query)
    assert match is not None, f"not a label_values(METRIC, LABEL) query: {query!r}"
    return match[1]
