"""What the engine is told of a request's thinking: where it stands as the reply opens, and its budget."""
from __future__ import annotations

from http import HTTPStatus

from transformers import PreTrainedTokenizerBase

from autoglm.server.openai.errors import APIError
from autoglm.server.reasoning.phase import prompt_phase
from autoglm.server.reasoning.registry import ReasoningParserSpec
from autoglm.thinking import ThinkingBounds, ThinkingPhase


def turn_phase(spec: ReasoningParserSpec | None, reply_opening: str) -> ThinkingPhase:
    """This turn's thinking phase, read from the text the template opened the reply with."""
    if spec is None:
        return ThinkingPhase.CLOSED
    return spec.output_phase(prompt_phase(reply_opening, spec.start, spec.end))


def request_thinking(spec: ReasoningParserSpec | None, tokenizer: PreTrainedTokenizerBase, phase: ThinkingPhase,
                     budget: int | None) -> ThinkingBounds | None:
    """The bounds the engine keeps, when the model writes both markers as single tokens: it then counts
    thinking tokens against `budget` and starts a grammar only where the answer starts. None otherwise;
    a budget asked of a server or model that cannot keep it is a 400."""
    if spec is None:
        if budget is not None:
            raise APIError(HTTPStatus.BAD_REQUEST, "thinking_token_budget needs the server to read the model's "
                           "thinking: start it with --reasoning-parser NAME", param="thinking_token_budget",
                           code="invalid_value")
        return None
    start, end = (_single_token_id(tokenizer, marker) for marker in (spec.start, spec.end))
    if start is None or end is None:
        if budget is not None:
            raise APIError(HTTPStatus.BAD_REQUEST, f"thinking_token_budget needs {spec.start} and {spec.end} to "
                           f"be single tokens of the model's vocabulary, and they are not in this model's",
                           param="thinking_token_budget", code="invalid_value")
        return None
    return ThinkingBounds(start, end, phase, budget)


def _single_token_id(tokenizer: PreTrainedTokenizerBase, marker: str) -> int | None:
    ids = tokenizer.encode(marker, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None
