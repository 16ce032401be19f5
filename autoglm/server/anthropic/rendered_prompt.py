"""The prompt the chat route renders for a chat request, counted without running it (count_tokens)."""
from __future__ import annotations

from autoglm.server.media.conversation import chat_prompt
from autoglm.server.openai.chat_prompt import ChatRendering
from autoglm.server.openai.chat_template_choice import content_format, request_chat_template
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.state import ServerState
from autoglm.server.tool_calls.tool_use import plan_tool_use
from autoglm.server.versions.served_version import ServedVersion


async def prompt_token_ids(state: ServerState, served: ServedVersion, body: ChatCompletionRequest) -> list[int]:
    """The messages and tools through the same template with the same variables, and each image's placeholder
    expanded to its tokens, as create_chat_completion renders them (openai/chat.py)."""
    own_template = request_chat_template(body.chat_template, state.config.chat)
    template = own_template or served.engine.tokenizer.chat_template
    tool_use = plan_tool_use(body, template, state.chat_parsers.tool_calls, state.config.chat.enable_auto_tool_choice)
    rendering = ChatRendering(body.add_generation_prompt, body.continue_final_message, body.chat_template_kwargs,
                              own_template, content_format(template, state.config.chat))
    rendered = await chat_prompt(served.tokenizers, served.images, body.messages, rendering,
                                 tool_use.template_tools if tool_use is not None else None, body.mm_processor_kwargs)
    return rendered.prompt.token_ids
