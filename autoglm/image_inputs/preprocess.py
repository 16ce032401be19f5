"""Images resized and cut into patches by the checkpoint's own image processor, as the model was trained on."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from PIL import Image

from autoglm.multimodal import ImageInput
from autoglm.errors import InvalidRequestError


class ImagePreprocessor:
    """The processor of the checkpoint in `folder`, on its PIL backend, with the server's resizing bounds
    (mm_processor_kwargs) over those of its preprocessor_config.json. Loaded once per served version; it keeps
    no state between calls, so worker threads share it."""

    def __init__(self, folder: Path, server_kwargs: Mapping[str, int]) -> None:
        # Imported here: transformers' image processing pulls in its model code, seconds that only a server
        # of a vision-language model should pay.
        from transformers import AutoImageProcessor

        self._processor = AutoImageProcessor.from_pretrained(folder, backend="pil")
        self.merge_size: int = self._processor.merge_size
        size = self._processor.size
        self._bounds = {"min_pixels": size.shortest_edge, "max_pixels": size.longest_edge, **server_kwargs}

    def bounds(self, request_kwargs: Mapping[str, int]) -> dict[str, int]:
        """The resizing bounds one request's images get: its own mm_processor_kwargs over the server's. The server's
        max_pixels is a ceiling: the encoder's work grows with the square of an image's patches, and one request's
        image would hold up every stream's step while it is encoded."""
        bounds = {**self._bounds, **request_kwargs}
        if bounds["max_pixels"] > self._bounds["max_pixels"]:
            raise InvalidRequestError(f"max_pixels ({bounds['max_pixels']}) may be at most the server's "
                                      f"{self._bounds['max_pixels']}: a request may lower it, not raise it (the "
                                      "server's mm_processor_kwargs setting raises it for everyone)")
        if bounds["min_pixels"] > bounds["max_pixels"]:
            raise InvalidRequestError(f"min_pixels ({bounds['min_pixels']}) must be at most max_pixels "
                             f"({bounds['max_pixels']}); the server's bounds, which the request's replace, are {self._bounds}")
        return bounds

    def preprocess(self, image: Image.Image, encoded: bytes, bounds: Mapping[str, int]) -> ImageInput:
        try:
            batch = self._processor(images=[image], return_tensors="pt",
                                    size={"shortest_edge": bounds["min_pixels"], "longest_edge": bounds["max_pixels"]})
        except ValueError as error:  # an aspect ratio past what the processor resizes
            raise InvalidRequestError(f"the image processor cannot read the image: {error}") from None
        grid = tuple(int(patches) for patches in batch["image_grid_thw"][0])
        return ImageInput(batch["pixel_values"], grid, content_hash(encoded, bounds))

    def num_tokens(self, image: ImageInput) -> int:
        """The image's placeholder tokens in the prompt: one per merged patch."""
        time_patches, height_patches, width_patches = image.grid_thw
        return time_patches * height_patches * width_patches // self.merge_size**2


def content_hash(encoded: bytes, bounds: Mapping[str, int]) -> bytes:
    """A digest of the encoded image and of the bounds it was resized within: what fixes its pixels."""
    digest = hashlib.sha256(json.dumps(dict(sorted(bounds.items()))).encode())
    digest.update(encoded)
    return digest.digest()
