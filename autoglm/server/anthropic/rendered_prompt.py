"""The prompt the chat route renders for a chat request, counted without running it (count_tokens)."""
from __future__ import annotations

from autoglm.server.media.conversation import chat_prompt
from autoglm.server.openai.chat_template_choice import request_rendering
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.state import ServerState
from autoglm.server.tool_calls.tool_use import plan_tool_use
from autoglm.server.versions.served_version import ServedVersion


async def prompt_token_ids(state: ServerState, served: ServedVersion, body: ChatCompletionRequest) -> list[int]:
    """The messages and tools through the same template with the same variables, and each image's placeholder
    expanded to its tokens, as create_chat_completion renders them (openai/chat.py)."""
    model_template = served.engine.tokenizer.chat_template
    rendering = request_rendering(body, state.config.chat, model_template)
    tool_use = plan_tool_use(body, rendering.chat_template or model_template, state.chat_parsers.tool_calls,
                             state.config.chat.enable_auto_tool_choice)
    rendered = await chat_prompt(served.tokenizers, served.images, body.messages, rendering,
                                 tool_use.template_tools if tool_use is not None else None, body.mm_processor_kwargs)
    return rendered.prompt.token_ids
