"""Encoded image bytes to RGB pixels, refusing what is not a whole PNG, JPEG or WebP image of a sane size."""
from __future__ import annotations

import io
import warnings

from PIL import Image, UnidentifiedImageError

from autoglm.server.media.errors import MediaError

# The formats a screenshot or photo comes in; PIL would read many more, each more code facing the request.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP")


def decode_image(data: bytes, max_pixels: int) -> Image.Image:
    """The image `data` encodes, in RGB. Its size is read from the header and checked before any pixel is
    decoded, so a small file that claims a huge image is refused at no cost."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
    except UnidentifiedImageError:
        raise MediaError(f"the image is not a {', '.join(IMAGE_FORMATS)} image PIL can read") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaError(f"the image's header claims more pixels than PIL decodes ({Image.MAX_IMAGE_PIXELS}) or "
                         f"max_image_pixels={max_pixels} allows") from None
    except (OSError, SyntaxError, ValueError) as error:
        raise MediaError(f"the image is corrupt or truncated: {error}") from None
    width, height = image.size
    if width * height > max_pixels:
        raise MediaError(f"the image is {width}x{height}, {width * height} pixels, more than "
                         f"max_image_pixels={max_pixels}")
    try:
        image.load()
        return image.convert("RGB")
    except (OSError, SyntaxError, ValueError) as error:
        raise MediaError(f"the image is corrupt or truncated: {error}") from None
