"""``reasoning.effort`` as the chat side's thinking controls: the chat template's ``enable_thinking`` and the
engine's thinking token budget.

"none" and "minimal" turn thinking off (``enable_thinking: false``, which thinking models' templates read);
"low" and "medium" turn it on with a budget of a quarter and a half of max_output_tokens, where the server
reads the model's thinking (``--reasoning-parser``) and the request sets max_output_tokens; "high" and above
turn it on with no budget but max_output_tokens itself. No effort leaves the model to its default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THINKING_OFF = ("none", "minimal")
# The share of max_output_tokens the thinking may take, at each effort that bounds it.
BUDGET_SHARES = {"low": 0.25, "medium": 0.5}


@dataclass(frozen=True)
class ThinkingControls:
    template_kwargs: dict[str, Any] | None = None  # chat_template_kwargs
    token_budget: int | None = None  # thinking_token_budget


def thinking_controls(effort: str | None, max_output_tokens: int | None, reads_thinking: bool) -> ThinkingControls:
    """The controls for `effort`; `reads_thinking` says whether the server can count thinking tokens."""
    if effort is None:
        return ThinkingControls()
    if effort in THINKING_OFF:
        return ThinkingControls({"enable_thinking": False})
    share = BUDGET_SHARES.get(effort)
    budget = (int(max_output_tokens * share)
              if share is not None and max_output_tokens is not None and reads_thinking else None)
    return ThinkingControls({"enable_thinking": True}, budget)
