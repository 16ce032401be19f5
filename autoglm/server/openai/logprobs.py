"""Log-probs in OpenAI's two shapes: the legacy completions lists, and chat's token objects."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from transformers import PreTrainedTokenizerBase

from autoglm.outputs import PositionLogprobs
from autoglm.server.openai.responses import ChatLogprobs, CompletionLogprobs, TokenLogprob, TopLogprob

# JSON has no -Infinity; a token the sampler ruled out is reported with this instead.
LOWEST_LOGPROB = -9999.0

DecodeToken = Callable[[int], str]


def token_decoder(tokenizer: PreTrainedTokenizerBase) -> DecodeToken:
    """Decodes one token id, for the positions that come without their text."""
    return lambda token_id: tokenizer.decode([token_id])


def completion_logprobs(token_ids: Sequence[int], positions: Sequence[PositionLogprobs | None], num_top: int,
                        decode: DecodeToken, first_offset: int = 0) -> CompletionLogprobs:
    """One entry per token; a position without log-probs (the first prompt token) gets None.

    ``text_offset`` counts characters of the returned text, starting at `first_offset`.
    """
    result = CompletionLogprobs(tokens=[], token_logprobs=[], top_logprobs=[], text_offset=[])
    offset = first_offset
    for token_id, position in zip(token_ids, positions, strict=True):
        text = _token_text(position, token_id, decode)
        result.tokens.append(text)
        result.text_offset.append(offset)
        offset += len(text)
        if position is None:
            result.token_logprobs.append(None)
            result.top_logprobs.append(None)
        else:
            result.token_logprobs.append(_finite(position[token_id].logprob))
            top: dict[str, float] = {}
            for token, logprob in _top(position, num_top, decode):
                top.setdefault(token, logprob)  # tokens that decode alike keep the likeliest's value
            result.top_logprobs.append(top)
    return result


def chat_logprobs(token_ids: Sequence[int], positions: Sequence[PositionLogprobs], num_top: int,
                  decode: DecodeToken) -> ChatLogprobs:
    content = []
    for token_id, position in zip(token_ids, positions, strict=True):
        text = _token_text(position, token_id, decode)
        top = [TopLogprob(token=token, logprob=logprob, bytes=_utf8(token))
               for token, logprob in _top(position, num_top, decode)]
        content.append(TokenLogprob(token=text, logprob=_finite(position[token_id].logprob), bytes=_utf8(text),
                                    top_logprobs=top))
    return ChatLogprobs(content=content)


def _top(position: PositionLogprobs, num_top: int, decode: DecodeToken) -> list[tuple[str, float]]:
    """The `num_top` most likely tokens at a position, most likely first.

    The position also holds the chosen token, which is left out unless it is among them.
    """
    ranked = sorted(position.items(), key=lambda item: item[1].logprob, reverse=True)[:num_top]
    return [(_token_text(position, token_id, decode), _finite(entry.logprob)) for token_id, entry in ranked]


def _token_text(position: PositionLogprobs | None, token_id: int, decode: DecodeToken) -> str:
    entry = position.get(token_id) if position is not None else None
    if entry is not None and entry.decoded_token is not None:
        return entry.decoded_token
    return decode(token_id)


def _finite(logprob: float) -> float:
    return max(logprob, LOWEST_LOGPROB)


def _utf8(text: str) -> list[int]:
    return list(text.encode("utf-8", errors="replace"))
