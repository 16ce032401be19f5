"""A chat request's prompt: its messages rendered and tokenized, its images read and their placeholders expanded."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.server.media.image_parts import conversation_images
from autoglm.server.media.prompt_images import PromptImages
from autoglm.server.openai.chat_prompt import ChatRendering, tokenize_chat
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatMessage
from autoglm.server.openai.tokenizer_pool import TokenizerPool


@dataclass(frozen=True)
class ChatPrompt:
    prompt: TokenizedPrompt
    reply_opening: str  # as RenderedChat gives it

    @property
    def image_hashes(self) -> tuple[bytes, ...]:
        """The images' content hashes, in order: what identifies them where the URL would not."""
        images = self.prompt.multi_modal.images if self.prompt.multi_modal is not None else ()
        return tuple(image.content_hash for image in images)


async def chat_prompt(tokenizers: TokenizerPool, images: PromptImages | None, messages: list[ChatMessage],
                      rendering: ChatRendering, tools: list[dict[str, Any]] | None = None,
                      mm_processor_kwargs: Mapping[str, int] | None = None) -> ChatPrompt:
    """The conversation as the engine takes it. `images` is the served model's image reading, None for a
    text-only model, which refuses image parts; the images are read on their own threads, the text is
    rendered and tokenized on a tokenizer worker."""
    parts = conversation_images(messages, images is not None, images.config.limit_mm_per_prompt if images else 0)
    if parts and rendering.content_format == "string":
        raise APIError(HTTPStatus.BAD_REQUEST, "the chat template reads each message's content as one string, "
                       "where an image has no place; serve it with chat_template_content_format 'openai'",
                       param="messages", code="invalid_value")
    inputs = await images.read(parts, mm_processor_kwargs) if images is not None and parts else []
    rendered = await tokenize_chat(tokenizers, messages, rendering, tools)
    prompt = images.prompt(rendered.token_ids, inputs) if images is not None else TokenizedPrompt(rendered.token_ids)
    return ChatPrompt(prompt, rendered.reply_opening)
