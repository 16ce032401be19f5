"""What the OpenAPI document says of the generation requests' fields beyond their types: the ranges the server
checks in code (sampling_params.py, unsupported.py, with messages of their own), so that a client or a schema
fuzzer reading the document knows which values are refused."""
from __future__ import annotations

from typing import Any

from autoglm.sampling_params import MAX_LOGIT_BIAS, MAX_LOGPROBS, MAX_N, MAX_SEED, MIN_SEED
from autoglm.server.openai.unsupported import UNIMPLEMENTED_FIELDS

_PENALTY = {"minimum": -2, "maximum": 2}
_LOGPROBS = {"minimum": 0, "maximum": MAX_LOGPROBS}
# JSON Schema's numeric keywords apply to numbers only, so a nullable field keeps its null.
FIELD_BOUNDS: dict[str, dict[str, Any]] = {
    "n": {"minimum": 1, "maximum": MAX_N},
    "temperature": {"minimum": 0, "maximum": 2},
    "top_p": {"exclusiveMinimum": 0, "maximum": 1},
    "top_k": {"minimum": -1},
    "min_p": {"minimum": 0, "maximum": 1},
    "presence_penalty": _PENALTY,
    "frequency_penalty": _PENALTY,
    "repetition_penalty": {"exclusiveMinimum": 0, "maximum": 2},
    "seed": {"minimum": MIN_SEED, "maximum": MAX_SEED},
    "max_tokens": {"minimum": 1},
    "max_completion_tokens": {"minimum": 1},
    "min_tokens": {"minimum": 0},
    "logprobs": _LOGPROBS,  # a completion's count; a chat's is a boolean, which these leave alone
    "top_logprobs": _LOGPROBS,
    "stop_token_ids": {"items": {"type": "integer", "minimum": 0}},
    "logit_bias": {"additionalProperties": {"type": "number", "minimum": -MAX_LOGIT_BIAS,
                                            "maximum": MAX_LOGIT_BIAS}},
    "guided_choice": {"minItems": 1, "items": {"type": "string", "minLength": 1}},
}


# /tokenize takes a prompt or messages, exactly one of the two; /detokenize's token ids are never negative (their
# upper bound is the vocabulary of the model named, which the document cannot know).
TOKENIZE_ONE_OF: list[dict[str, Any]] = [
    {"required": ["prompt"], "properties": {"prompt": {"type": "string"}}},
    {"required": ["messages"], "properties": {"messages": {"type": "array"}}},
]
TOKEN_IDS: dict[str, Any] = {"items": {"type": "integer", "minimum": 0}}


def request_field_bounds(max_abs_priority: int) -> dict[str, dict[str, Any]]:
    """Each bounded field's keywords: the fixed ranges, the priority the server's setting allows, and the
    only values a field the server does not implement yet takes."""
    bounds = {**FIELD_BOUNDS, "priority": {"minimum": -max_abs_priority, "maximum": max_abs_priority}}
    for field in UNIMPLEMENTED_FIELDS:
        if "." not in field.path:
            bounds[field.path] = {"enum": list(field.harmless)}
    return bounds
