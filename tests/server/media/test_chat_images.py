"""A conversation with images on the glm4v-tiny checkpoint: the same ids, pixels and grids as the model's own
transformers processor gives (on qwen2.5-vl-tiny too); limits, resizing bounds and content hashes."""
from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from PIL import Image
from transformers import AutoTokenizer

from autoglm.config import AutoGLMConfig
from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.media.conversation import chat_prompt
from autoglm.server.media.prompt_images import PromptImages
from autoglm.server.openai.chat_prompt import ChatRendering
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest, ChatMessage
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.response_cache.key import response_cache_key
from tests.server.media.images import data_url, encoded
from tests.vision_processor import image_only_processor

OPENAI_PARTS = ChatRendering(content_format="openai")
SHOT, OTHER = encoded(56, 84, (200, 30, 10)), encoded(56, 84, (10, 30, 200))


def image_part(data: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(data), "detail": "high"}}


def user_turn(*images: bytes, text: str = "What is here?") -> dict:
    return {"role": "user", "content": [*map(image_part, images), {"type": "text", "text": text}]}


@contextmanager
def reading_of(folder: Path) -> Iterator[tuple[TokenizerPool, PromptImages]]:
    """The server's tokenizer pool and image reader for the checkpoint in ``folder``."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pool = TokenizerPool(tokenizer, 1, PromptCharLimit(100_000, 100))
    media = AutoGLMConfig(limit_mm_per_prompt=2).server_config().media
    images = PromptImages.for_checkpoint(folder, media, 1)
    try:
        yield pool, images
    finally:
        pool.shutdown()
        images.shutdown()


@pytest.fixture(scope="module")
def reading(glm4v_tiny):
    with reading_of(glm4v_tiny) as pool_and_images:
        yield pool_and_images


def prompt_of(reading, messages, **kwargs):
    pool, images = reading
    parsed = [ChatMessage.model_validate(message) for message in messages]
    return asyncio.run(chat_prompt(pool, images, parsed, OPENAI_PARTS, **kwargs))


def transformers_processor(folder):
    """The model's own processor, minus the video processor transformers builds only with torchvision."""
    return image_only_processor(folder)


@pytest.mark.parametrize("checkpoint", ["glm4v_tiny", "qwen2_5_vl_tiny"])
def test_ids_pixels_and_grids_equal_the_transformers_processors(request, checkpoint):
    folder = request.getfixturevalue(checkpoint)
    history = [{"role": "system", "content": "You operate a phone."}, user_turn(SHOT, text="Open settings"),
               {"role": "assistant", "content": "do(action=\"Tap\")"}, user_turn(OTHER, text="Now?")]
    with reading_of(folder) as reading:
        chat = prompt_of(reading, history)
    processor = transformers_processor(folder)
    as_transformers = [{"role": turn["role"], "content": turn["content"] if isinstance(turn["content"], str) else [
        {"type": "image"} if part["type"] == "image_url" else part for part in turn["content"]]} for turn in history]
    text = processor.apply_chat_template(as_transformers, tokenize=False, add_generation_prompt=True)
    expected = processor(text=[text], images=[Image.open(io.BytesIO(data)) for data in (SHOT, OTHER)],
                         return_tensors="pt")
    assert chat.prompt.token_ids == expected["input_ids"][0].tolist()
    images = chat.prompt.multi_modal.images
    assert [image.grid_thw for image in images] == [tuple(grid.tolist()) for grid in expected["image_grid_thw"]]
    assert torch.equal(torch.cat([image.pixel_values for image in images]), expected["pixel_values"])


def test_a_turn_whose_image_was_removed_is_plain_text(reading):
    earlier = {"role": "user", "content": [{"type": "text", "text": "Open settings"}]}
    chat = prompt_of(reading, [earlier, {"role": "assistant", "content": "ok"}, user_turn(SHOT)])
    assert len(chat.prompt.multi_modal.images) == 1
    assert prompt_of(reading, [earlier]).prompt.multi_modal is None


def test_a_bare_url_string_reads_as_the_url_object(reading):
    bare = {"role": "user", "content": [{"type": "image_url", "image_url": data_url(SHOT)}]}
    assert prompt_of(reading, [bare]).image_hashes == prompt_of(reading, [user_turn(SHOT, text="")]).image_hashes


def test_the_content_hash_follows_the_bytes_and_the_resizing_bounds(reading):
    same, again, other = (prompt_of(reading, [user_turn(data)]).image_hashes for data in (SHOT, SHOT, OTHER))
    assert same == again != other
    smaller = prompt_of(reading, [user_turn(SHOT)], mm_processor_kwargs={"max_pixels": 20_000}).image_hashes
    assert smaller != same


def test_the_response_cache_keys_images_by_content_not_by_url(reading):
    def key(url: str, hashes: tuple[bytes, ...]) -> str:
        body = ChatCompletionRequest.model_validate(
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]})
        return response_cache_key("m", "source", None, "/v1/chat/completions", body, hashes)
    shot_hashes = prompt_of(reading, [user_turn(SHOT)]).image_hashes
    other_hashes = prompt_of(reading, [user_turn(OTHER)]).image_hashes
    assert key(data_url(SHOT), shot_hashes) == key("https://cdn.example.com/shot.png", shot_hashes)
    assert key(data_url(SHOT), shot_hashes) != key(data_url(SHOT), other_hashes)


@pytest.mark.parametrize("messages, kwargs, param, words", [
    ([user_turn(SHOT, SHOT, SHOT)], {}, "messages[0].content[2]",
     "at most limit_mm_per_prompt=2 images, and this is image 3 of 3"),
    ([user_turn(SHOT), user_turn(b"not an image")], {}, "messages[1].content[0]", "is not a PNG, JPEG, WEBP image"),
    ([user_turn(SHOT, text="<|image|>")], {}, "messages", "must not spell the model's image token"),
    ([user_turn(SHOT)], {"mm_processor_kwargs": {"min_pixels": 10_000_000}}, "mm_processor_kwargs",
     "min_pixels (10000000) must be at most max_pixels (9633792)"),
    ([user_turn(SHOT)], {"mm_processor_kwargs": {"max_pixels": 9633793}}, "mm_processor_kwargs",
     "max_pixels (9633793) may be at most the server's 9633792: a request may lower it, not raise it"),
])
def test_what_cannot_be_read_is_400_naming_it(reading, messages, kwargs, param, words):
    with pytest.raises(APIError) as caught:
        prompt_of(reading, messages, **kwargs)
    error = caught.value.body.error
    assert caught.value.status == 400 and error.param == param and words in error.message, error


def test_images_need_a_template_that_reads_parts(reading):
    pool, images = reading
    with pytest.raises(APIError, match="chat_template_content_format 'openai'"):
        asyncio.run(chat_prompt(pool, images, [ChatMessage.model_validate(user_turn(SHOT))], ChatRendering()))


@pytest.mark.parametrize("kwargs, words", [
    ({"max_side": 5}, "'max_side' is not an image processor setting this server passes on; allowed: min_pixels, "
                      "max_pixels"),
    ({"max_pixels": 0}, "max_pixels must be a positive whole number of pixels, not 0"),
    ({"max_pixels": "9"}, "max_pixels must be a positive whole number of pixels, not '9'"),
    ({"min_pixels": 50, "max_pixels": 40}, "min_pixels (50) must be at most max_pixels (40)"),
])
def test_a_requests_mm_processor_kwargs_are_checked(kwargs, words):
    with pytest.raises(ValueError, match="mm_processor_kwargs") as caught:
        ChatCompletionRequest.model_validate({"messages": [user_turn()], "mm_processor_kwargs": kwargs})
    assert words in str(caught.value)
