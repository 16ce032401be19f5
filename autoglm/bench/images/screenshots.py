"""Synthetic phone screenshots and the prompts that carry them, built as the server builds a chat request's.

A screenshot is drawn from a seed (status bar, a search field, list rows of icons and text-like strokes),
so every run measures the same pixels; each seed is a different image, which the prefix cache misses.
"""
from __future__ import annotations

import io
import random
from dataclasses import dataclass

from PIL import Image, ImageDraw

from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.multimodal import ImageInput, MultiModalPrompt
from autoglm.image_inputs.placeholders import expand_image_tokens
from autoglm.image_inputs.preprocess import ImagePreprocessor

SCREENSHOT_SIZE = (1080, 2400)  # width, height: a common phone screen
INSTRUCTION = "Which app is open? Tap the search field and type the name of the nearest cafe."
_ROW_HEIGHT = 180


@dataclass(frozen=True)
class Screenshot:
    image: Image.Image
    png: bytes  # what a client would send, and what the image's content hash covers


def draw_screenshot(seed: int, size: tuple[int, int] = SCREENSHOT_SIZE) -> Screenshot:
    """A plausible app screen: flat areas and sharp edges, as the model reads in practice."""
    rng = random.Random(seed)
    width, height = size
    image = Image.new("RGB", size, (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width, 90), fill=(30, 30, 30))
    draw.rounded_rectangle((40, 140, width - 40, 260), radius=50, fill=(235, 235, 240))
    for top in range(320, height - 200, _ROW_HEIGHT):
        icon = tuple(rng.randrange(256) for _ in range(3))
        draw.rounded_rectangle((40, top, 160, top + 120), radius=24, fill=icon)
        for line in range(2):  # a title and a grey subtitle
            draw.rectangle((200, top + 20 + 50 * line, 200 + rng.randrange(200, width - 280), top + 48 + 50 * line),
                           fill=(60 + 80 * line,) * 3)
    draw.rectangle((0, height - 160, width, height), fill=(240, 240, 245))
    encoded = io.BytesIO()
    image.save(encoded, format="PNG")
    return Screenshot(image, encoded.getvalue())


def preprocess(preprocessor: ImagePreprocessor, screenshot: Screenshot, max_pixels: int) -> ImageInput:
    """The checkpoint's image processor at ``max_pixels``, the largest area it scales a screenshot into."""
    return preprocessor.preprocess(screenshot.image, screenshot.png, preprocessor.bounds({"max_pixels": max_pixels}))


def screenshot_prompt(tokenizer, image_token_id: int, num_image_tokens: int, image: ImageInput) -> TokenizedPrompt:
    """One user turn of the screenshot then the instruction, rendered by the checkpoint's chat template and
    its image token repeated once per merged patch."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": INSTRUCTION}]}]
    token_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                              return_dict=False)
    expanded = expand_image_tokens(list(token_ids), image_token_id, [num_image_tokens])
    return TokenizedPrompt(expanded, multi_modal=MultiModalPrompt((image,)))
