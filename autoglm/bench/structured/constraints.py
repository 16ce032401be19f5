"""The constraints the benchmark's neighbours decode under: a JSON schema and a regex that cannot be
complete before ``output_len`` tokens, so that a neighbour stays in the batch as long as the requests
measured beside it (a JSON integer or a word is at least one token, a separator another)."""
from __future__ import annotations

from autoglm.structured_outputs import StructuredOutputsParams


def json_constraint(output_len: int) -> StructuredOutputsParams:
    """An object holding an array of bounded integers, at least ``output_len`` of them."""
    return StructuredOutputsParams(json={
        "type": "object",
        "properties": {"values": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 999},
                                  "minItems": output_len}},
        "required": ["values"],
    })


def regex_constraint(output_len: int) -> StructuredOutputsParams:
    """Comma-separated lowercase words, at least ``output_len // 2 + 1`` of them."""
    return StructuredOutputsParams(regex=f"[a-z]+(, [a-z]+){{{output_len // 2},}}")


def neighbour_constraints(count: int, output_len: int) -> list[StructuredOutputsParams]:
    """``count`` constraints, JSON schema and regex in turn."""
    kinds = (json_constraint(output_len), regex_constraint(output_len))
    return [kinds[index % len(kinds)] for index in range(count)]
