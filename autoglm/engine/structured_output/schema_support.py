"""JSON-schema keywords the grammar cannot enforce, refused before compiling.

xgrammar 0.2 compiles a schema that uses them but ignores them (each checked by feeding it output
that breaks the keyword), so a request would get output that does not match the schema it sent,
and no error. As vLLM does for its xgrammar backend, such a schema is refused instead, naming the
keyword and where it stands, so the caller can drop it or validate that part afterwards.
"""
from __future__ import annotations

from typing import Any

from autoglm.errors import InvalidRequestError

# Keywords that constrain the output but that the grammar ignores.
UNENFORCED_KEYWORDS = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
                       "contains", "minContains", "maxContains")
# The string formats the grammar enforces; it lets any string through for another.
ENFORCED_FORMATS = ("date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
                    "uri-reference", "uri-template", "uuid", "json-pointer", "relative-json-pointer")
# Deeper than this, a schema is refused rather than risk the compiler's recursion.
MAX_SCHEMA_DEPTH = 128
# Counts the compiler keeps in 32-bit integers: a larger bound would wrap around inside it.
_COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
MAX_COUNT = 2**31 - 1

# Where a schema holds other schemas: one, a list of them, or a mapping of names to them.
_ONE_SCHEMA = ("items", "additionalProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
               "additionalItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def check_enforceable(schema: Any, field: str) -> None:
    """Raise InvalidRequestError naming the first part of ``schema`` the grammar would not enforce.

    The schema is walked without recursion, keyword by keyword: property names and data (``enum``,
    ``const``, ``default``) are never mistaken for keywords."""
    pending: list[tuple[Any, str, int]] = [(schema, "", 0)]
    while pending:
        node, path, depth = pending.pop()
        if not isinstance(node, dict):
            continue
        where = path or "/"
        if depth > MAX_SCHEMA_DEPTH:
            _refuse(field, f"nests schemas deeper than {MAX_SCHEMA_DEPTH} levels (at {where})")
        for keyword in UNENFORCED_KEYWORDS:
            if keyword in node:
                _refuse(field, f"uses '{keyword}' (at {where}), which the grammar cannot enforce; "
                               "drop it and check that part of the output afterwards")
        _check_node(node, field, where)
        for keyword in _ONE_SCHEMA:
            pending.append((node.get(keyword), f"{path}/{keyword}", depth + 1))
        for keyword in _SCHEMA_LISTS:
            if isinstance(node.get(keyword), list):
                pending.extend((item, f"{path}/{keyword}/{i}", depth + 1) for i, item in enumerate(node[keyword]))
        for keyword in _SCHEMA_MAPS:
            if isinstance(node.get(keyword), dict):
                pending.extend((item, f"{path}/{keyword}/{name}", depth + 1) for name, item in node[keyword].items())


def _check_node(node: dict[str, Any], field: str, where: str) -> None:
    """The keywords the grammar enforces only in some forms."""
    if node.get("uniqueItems") is True:
        _refuse(field, f"uses 'uniqueItems' (at {where}), which the grammar cannot enforce; drop it and check "
                       "that part of the output afterwards")
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) > 1:
        _refuse(field, f"uses 'allOf' with {len(node['allOf'])} schemas (at {where}); the grammar enforces "
                       "only one: merge them into one schema")
    for keyword in _COUNT_KEYWORDS:
        count = node.get(keyword)
        whole = isinstance(count, int) and not isinstance(count, bool)
        if count is not None and not (whole and 0 <= count <= MAX_COUNT):
            _refuse(field, f"sets '{keyword}' to {count!r} (at {where}); it must be a whole number in [0, {MAX_COUNT}]")
    string_format = node.get("format")
    if string_format is not None and string_format not in ENFORCED_FORMATS:
        _refuse(field, f"uses the string format {string_format!r} (at {where}), which the grammar cannot enforce; "
                       f"the formats it enforces: {', '.join(ENFORCED_FORMATS)}")
    reference = node.get("$ref")
    if reference is not None and not (reference == "#" or str(reference).startswith("#/")):
        _refuse(field, f"refers to {reference!r} (at {where}); only references within the schema "
                       "('#' or '#/...') are followed")


def _refuse(field: str, problem: str) -> None:
    raise InvalidRequestError(f"{field}: the schema {problem}", param=field)
