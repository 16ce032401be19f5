"""Decoding: whole PNG, JPEG and WebP images only, their size checked from the header before any pixel."""
from __future__ import annotations

import pytest

from autoglm.server.media.decode import decode_image
from autoglm.server.media.errors import MediaError
from tests.server.media.images import encoded, png_claiming


def test_an_image_decodes_to_rgb():
    image = decode_image(encoded(30, 20, kind="WEBP"), 10_000)
    assert image.mode == "RGB" and image.size == (30, 20)


def test_a_header_claiming_a_huge_image_is_refused_before_decoding():
    bomb = png_claiming(100_000, 100_000)
    assert len(bomb) < 100
    with pytest.raises(MediaError, match="PIL decodes .* or max_image_pixels=50000000"):
        decode_image(bomb, 50_000_000)
    with pytest.raises(MediaError, match="is 4000x3000, 12000000 pixels, more than max_image_pixels=1000000"):
        decode_image(png_claiming(4000, 3000), 1_000_000)


@pytest.mark.parametrize("data, words", [
    (encoded()[:-40], "corrupt or truncated"),
    (encoded(kind="JPEG")[:200], "corrupt or truncated"),
    (b"GIF89a" + b"\0" * 20, "is not a PNG, JPEG, WEBP image"),
    (b"hello", "is not a PNG, JPEG, WEBP image"),
])
def test_a_corrupt_truncated_or_foreign_image_is_refused(data, words):
    with pytest.raises(MediaError, match=words):
        decode_image(data, 50_000_000)
