"""Each image's one placeholder token in a rendered prompt, repeated once per merged patch of that image."""
from __future__ import annotations

from autoglm.errors import InvalidRequestError


def expand_image_tokens(token_ids: list[int], image_token_id: int, tokens_per_image: list[int]) -> list[int]:
    """`token_ids` with its n-th `image_token_id` repeated `tokens_per_image[n]` times, as the model's processor
    expands the text. The template writes one per image part; any other count means the messages' text spells
    the image token itself, which would shift every image after it."""
    found = token_ids.count(image_token_id)
    if found != len(tokens_per_image):
        raise InvalidRequestError(f"the rendered prompt holds {found} image tokens for {len(tokens_per_image)} images; the "
                         f"messages' text must not spell the model's image token")
    expanded: list[int] = []
    images = iter(tokens_per_image)
    for token_id in token_ids:
        expanded.extend([token_id] * next(images) if token_id == image_token_id else [token_id])
    return expanded
