"""A Response's usage: the chat route's token counts under the Responses API's names, the thinking's counted."""
from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from autoglm.server.openai.chat_reply import ReplyReading
from autoglm.server.openai.responses import UsageInfo
from autoglm.server.responses_api.objects import InputTokensDetails, OutputTokensDetails, ResponseUsage


def response_usage(usage: UsageInfo, reasoning_tokens: int) -> ResponseUsage:
    cached = InputTokensDetails(cached_tokens=usage.prompt_tokens_details.cached_tokens)
    return ResponseUsage(input_tokens=usage.prompt_tokens, input_tokens_details=cached,
                         output_tokens=usage.completion_tokens,
                         output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning_tokens),
                         total_tokens=usage.total_tokens)


def thinking_tokens(token_ids: list[int], thinking: str, reading: ReplyReading,
                    tokenizer: PreTrainedTokenizerBase) -> int:
    """The tokens of the reply (`token_ids`) that its `thinking` took, its markers included: those up to the
    end-of-thinking marker where that is one token (all of them for a reply cut off while it thought), else
    the thinking's text encoded again."""
    if not thinking or reading.reasoning is None:
        return 0
    end = tokenizer.encode(reading.reasoning.end, add_special_tokens=False)
    if len(end) != 1:
        return len(tokenizer.encode(thinking, add_special_tokens=False))
    return token_ids.index(end[0]) + 1 if end[0] in token_ids else len(token_ids)
