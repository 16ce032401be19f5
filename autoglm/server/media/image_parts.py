"""The image parts of a conversation, each named as the API names it, checked against the model and the limit."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.server.media.errors import MediaError
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatMessage


@dataclass(frozen=True)
class ImagePart:
    param: str  # where the request holds it: messages[i].content[j]
    url: str


def conversation_images(messages: list[ChatMessage], takes_images: bool, limit: int) -> list[ImagePart]:
    """The conversation's image parts in order; a 400 naming the first one a text-only model cannot read, or
    the first one past limit_mm_per_prompt. A turn whose image the client removed is plain text, as sent."""
    parts = [ImagePart(f"messages[{message_index}].content[{part_index}]", part.image_url.url)
             for message_index, message in enumerate(messages) for part_index, part in message.image_parts]
    if parts and not takes_images:
        raise _refusal(parts[0], "this model takes text only, so it cannot read a part of type 'image_url'; send "
                                 "the content as text")
    if len(parts) > limit:
        raise _refusal(parts[limit], f"a prompt may carry at most limit_mm_per_prompt={limit} images, and this is "
                                     f"image {limit + 1} of {len(parts)}")
    return parts


def _refusal(part: ImagePart, message: str) -> APIError:
    return MediaError(message).at(part.param)
