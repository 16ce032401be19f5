"""A served vision model's images: read, decoded and preprocessed on threads of their own, then placed in
the prompt as its image tokens.

Fetching waits on the network and decoding and resizing take tens of milliseconds an image: on the event loop
they would stall every connection, on the tokenizer workers every text request queued behind them.
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autoglm.config.server import MediaConfig
from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.multimodal import ImageInput, MultiModalPrompt
from autoglm.server.media.decode import decode_image
from autoglm.errors import InvalidRequestError
from autoglm.server.media.errors import MediaError
from autoglm.server.media.fetch import Resolver, resolve_addresses
from autoglm.server.media.image_parts import ImagePart
from autoglm.server.media.image_sources import ImageSources
from autoglm.image_inputs.placeholders import expand_image_tokens
from autoglm.image_inputs.preprocess import ImagePreprocessor
from autoglm.server.media.vision_model import VisionModel


class PromptImages:
    def __init__(self, vision: VisionModel, preprocessor: ImagePreprocessor, config: MediaConfig, num_workers: int,
                 resolve: Resolver = resolve_addresses) -> None:
        self.vision = vision
        self.config = config
        self._preprocessor = preprocessor
        self._sources = ImageSources(config, resolve)
        self._executor = ThreadPoolExecutor(num_workers, thread_name_prefix="autoglm-images")

    @classmethod
    def for_checkpoint(cls, folder: Path, config: MediaConfig, num_workers: int) -> PromptImages | None:
        """The checkpoint's image reading; None for a text-only model."""
        vision = VisionModel.of(folder)
        if vision is None:
            return None
        return cls(vision, ImagePreprocessor(folder, config.mm_processor_kwargs), config, num_workers)

    async def read(self, parts: list[ImagePart], request_kwargs: Mapping[str, int] | None) -> list[ImageInput]:
        """Each part's image, preprocessed within the request's resizing bounds; the first failure is a 400 (413
        for a size) naming its part."""
        try:
            bounds = self._preprocessor.bounds(request_kwargs or {})
        except InvalidRequestError as error:
            raise MediaError.of(error).at("mm_processor_kwargs") from None
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(loop.run_in_executor(self._executor, self._read_one, part, bounds)
                                           for part in parts)))

    def _read_one(self, part: ImagePart, bounds: Mapping[str, int]) -> ImageInput:
        try:
            encoded = self._sources.read(part.url)
            return self._preprocessor.preprocess(decode_image(encoded, self.config.max_image_pixels), encoded, bounds)
        except InvalidRequestError as error:
            raise MediaError.of(error).at(part.param) from None

    def prompt(self, token_ids: list[int], images: list[ImageInput]) -> TokenizedPrompt:
        """The rendered prompt with each image's placeholder expanded, and the images beside it."""
        counts = [self._preprocessor.num_tokens(image) for image in images]
        try:
            expanded = expand_image_tokens(token_ids, self.vision.image_token_id, counts)
        except InvalidRequestError as error:
            raise MediaError.of(error).at("messages") from None
        return TokenizedPrompt(expanded, multi_modal=MultiModalPrompt(tuple(images)) if images else None)

    def shutdown(self) -> None:
        """Drop the work not started yet; work already running finishes on its own."""
        self._executor.shutdown(wait=False, cancel_futures=True)
