"""The ``speculative_config`` setting: how the engine proposes tokens for the target model to verify.

Plain data, validated once where settings are read; vLLM's names, so its configs carry over.
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SPECULATIVE_METHODS = ("ngram", "draft_model", "mtp")
MAX_SPECULATIVE_TOKENS = 16


class SpeculativeConfig(BaseModel):
    """Propose up to ``num_speculative_tokens`` tokens per decode step, verified in one target pass.

    ``ngram`` looks the sequence's latest ``prompt_lookup_max`` .. ``prompt_lookup_min`` tokens up
    earlier in its own context and proposes what followed them; ``draft_model`` runs ``model``, a
    smaller checkpoint sharing the target's tokenizer; ``mtp`` chains the target checkpoint's own
    multi-token prediction layer (GLM-4.5 and GLM-4.6).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["ngram", "draft_model", "mtp"]
    num_speculative_tokens: int = Field(ge=1, le=MAX_SPECULATIVE_TOKENS)
    prompt_lookup_min: int = Field(2, ge=1)
    prompt_lookup_max: int = Field(4, ge=1)
    model: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "SpeculativeConfig":
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(f"prompt_lookup_min ({self.prompt_lookup_min}) must not exceed "
                             f"prompt_lookup_max ({self.prompt_lookup_max})")
        if self.method == "draft_model" and self.model is None:
            raise ValueError("method 'draft_model' needs model: the draft checkpoint's folder")
        if self.method != "draft_model" and self.model is not None:
            raise ValueError(f"model is read only by method 'draft_model'; method '{self.method}' needs no model")
        return self


def parse_speculative_config(value: Any) -> SpeculativeConfig | None:
    """A mapping, or its JSON text (as a flag or environment variable gives it); None or '' for none.

    Raises ValueError naming each bad entry and what it allows.
    """
    if value is None or isinstance(value, SpeculativeConfig):
        return value
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"expected a JSON object such as '{{\"method\": \"ngram\", "
                             f"\"num_speculative_tokens\": 4}}'; {error}") from None
    if not isinstance(value, dict):
        raise ValueError("expected a mapping with method and num_speculative_tokens")
    try:
        return SpeculativeConfig.model_validate(value)
    except ValidationError as error:
        raise ValueError("; ".join(_explain(problem) for problem in error.errors())) from None


def _explain(problem: Any) -> str:
    where = ".".join(str(part) for part in problem["loc"])
    if problem["type"] == "extra_forbidden":
        return f"unknown entry {where!r}; allowed: {', '.join(SpeculativeConfig.model_fields)}"
    if problem["type"] == "value_error":
        return str(problem["ctx"]["error"])
    if where == "method":
        return f"method: expected one of {', '.join(repr(m) for m in SPECULATIVE_METHODS)}, got {problem['input']!r}"
    return f"{where}: {problem['msg'].lower()}"
