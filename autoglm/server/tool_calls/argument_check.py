"""Whether a call's arguments are what its tool declared: an object that its parameters' schema accepts."""
from __future__ import annotations

import json
from typing import Any

import jsonschema


def arguments_match(arguments: str, schema: dict[str, Any] | None) -> bool:
    """Whether the JSON text `arguments` is an object valid against `schema` (None: any object).

    The schema is the client's: one that jsonschema cannot use (malformed, an unresolvable $ref, a
    pattern Python cannot compile) says nothing against the arguments, so they count as a match.
    """
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    if schema is None:
        return True
    try:
        # A schema that names no draft, or one jsonschema does not know, is read as the latest draft.
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator_class.check_schema(schema)
        return validator_class(schema).is_valid(value)
    except Exception:  # jsonschema's failures on a schema it cannot use take many types; none is the arguments'
        return True
