"""Images sent inline as base64 ``data:`` URLs."""
from __future__ import annotations

import base64
import binascii
import re

from autoglm.server.media.errors import MediaError, too_large

# The image types the decoder reads, as data URLs name them.
IMAGE_MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp")
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[^;,]*)*)(?P<base64>;base64)?,",
                       re.IGNORECASE)


def decode_data_url(url: str, max_bytes: int) -> bytes:
    """The encoded image a ``data:image/...;base64,`` URL carries (the request body's own limit bounds the work)."""
    match = _DATA_URL.match(url)
    if match is None or not match["base64"]:
        raise MediaError("a data URL must have the form 'data:image/png;base64,...' (base64 only)")
    media_type = (match["type"] or "").lower()
    if media_type == "image/jpg":
        media_type = "image/jpeg"
    if media_type not in IMAGE_MEDIA_TYPES:
        raise MediaError(f"a data URL of type {media_type or 'text/plain'!r} is not an image this server reads; "
                         f"allowed: {', '.join(IMAGE_MEDIA_TYPES)}")
    try:
        data = base64.b64decode(url[match.end():], validate=True)
    except (binascii.Error, ValueError):
        raise MediaError("the data URL's payload is not valid base64") from None
    if len(data) > max_bytes:
        raise too_large("the data URL's image", len(data), max_bytes)
    return data
