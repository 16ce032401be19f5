"""A chat request's messages rendered with a chat template into the prompt's token ids."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from typing import Any, Literal

from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from autoglm.engine.tokenize import PromptCharLimit, encode_text
from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatMessage
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.tool_calls.families import tool_call_family

# Names a request's chat_template_kwargs may not set: apply_chat_template's own arguments (the request's
# fields set those) and the messages, which the template is given from the request's messages.
_APPLY_CHAT_TEMPLATE = inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters
RESERVED_TEMPLATE_KWARGS = frozenset({"messages"} | {name for name, parameter in _APPLY_CHAT_TEMPLATE.items()
                                                     if parameter.kind is not inspect.Parameter.VAR_KEYWORD} - {"self"})


@dataclass(frozen=True)
class ChatRendering:
    """How a request asks its conversation to be rendered, beyond the messages and tools."""

    add_generation_prompt: bool = True
    continue_final_message: bool = False  # the last message left open, for the reply to continue it
    template_kwargs: dict[str, Any] | None = None  # vLLM's chat_template_kwargs, such as enable_thinking
    chat_template: str | None = None  # a template of the request's own, already allowed; None: the model's
    content_format: Literal["string", "openai"] = "string"
    # Whether to find what the template wrote to open the reply (a second rendering, without it).
    find_reply_opening: bool = False


@dataclass(frozen=True)
class RenderedChat:
    token_ids: list[int]
    # The text the template wrote to open the reply (the generation prompt, "<|assistant|>\n<think>" say,
    # or the open last message), where a thinking model's prompt says whether this turn thinks; empty
    # unless asked for.
    reply_opening: str = ""


def render_chat_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[ChatMessage], rendering: ChatRendering,
                       char_limit: PromptCharLimit, tools: list[dict[str, Any]] | None = None) -> RenderedChat:
    """The conversation (and the tools it may call) as the model was trained to read it; a rendering
    longer than the context could hold is refused before it is tokenized.

    The template writes any special tokens itself, so the tokenizer must not add them again. A family
    whose template reads tool calls and results in its own shapes gets the conversation in those.
    """
    template = rendering.chat_template or tokenizer.chat_template
    if not template:
        raise APIError(HTTPStatus.BAD_REQUEST, "this model has no chat template; use /v1/completions instead",
                       param="messages", code="invalid_value")
    reserved = sorted(RESERVED_TEMPLATE_KWARGS.intersection(rendering.template_kwargs or {}))
    if reserved:
        raise APIError(HTTPStatus.BAD_REQUEST, f"chat_template_kwargs may not set {quote_value(reserved[0])}: the "
                       f"server sets it from the request", param="chat_template_kwargs", code="invalid_value")
    history = [message.as_template_input(rendering.content_format) for message in messages]
    family = tool_call_family(template)
    if family is not None and family.history is not None:
        history = family.history(history, tools, template)
    render = partial(_render, tokenizer, history, tools, template, rendering)
    text = render(rendering.add_generation_prompt)
    char_limit.check(text)
    opening = _reply_opening(text, render, messages, rendering) if rendering.find_reply_opening else ""
    return RenderedChat(encode_text(tokenizer, text, add_special_tokens=False), opening)


def _render(tokenizer: PreTrainedTokenizerBase, history: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            template: str, rendering: ChatRendering, add_generation_prompt: bool) -> str:
    try:
        return tokenizer.apply_chat_template(history, tools=tools, chat_template=template, tokenize=False,
                                             add_generation_prompt=add_generation_prompt,
                                             continue_final_message=rendering.continue_final_message,
                                             **(rendering.template_kwargs or {}))
    except TemplateError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, f"the chat template rejected the messages: {error}",
                       param="messages", code="invalid_value") from None
    except (TypeError, ValueError) as error:
        # transformers' check that the template writes out the last message, so that it can be left open; a
        # template variable the kwargs replaced with a value of another kind (a string where it calls a function).
        if not (rendering.template_kwargs or rendering.continue_final_message):
            raise
        asked = "chat_template_kwargs" if rendering.template_kwargs else "continue_final_message"
        raise APIError(HTTPStatus.BAD_REQUEST, f"the chat template cannot render the messages with the request's "
                       f"{asked}: {error}", param=asked, code="invalid_value") from None


def _reply_opening(text: str, render: partial[str], messages: list[ChatMessage], rendering: ChatRendering) -> str:
    """What the template wrote after the conversation to open the reply: the rendering's difference
    from one without the generation prompt, or the last message itself when the reply continues it."""
    if rendering.continue_final_message:
        return messages[-1].as_template_input()["content"]
    if not rendering.add_generation_prompt:
        return ""
    without = render(False)
    return text[len(without):] if text.startswith(without) else ""


async def tokenize_chat(tokenizers: TokenizerPool, messages: list[ChatMessage], rendering: ChatRendering,
                        tools: list[dict[str, Any]] | None = None) -> RenderedChat:
    """The conversation's token ids, rendered and tokenized on a tokenizer worker."""
    return await tokenizers.run(partial(render_chat_prompt, messages=messages, rendering=rendering,
                                        char_limit=tokenizers.char_limit, tools=tools))
