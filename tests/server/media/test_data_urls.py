"""Inline images: base64 data URLs of the image types the decoder reads, and nothing else."""
from __future__ import annotations

from http import HTTPStatus

import pytest

from autoglm.server.media.data_url import decode_data_url
from autoglm.server.media.errors import MediaError
from tests.server.media.images import data_url, encoded


def test_a_png_jpeg_or_webp_data_url_gives_its_bytes():
    for kind, media_type in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        data = encoded(kind=kind)
        assert decode_data_url(data_url(data, media_type), 1 << 20) == data


@pytest.mark.parametrize("url, words", [
    ("data:text/plain;base64,aGVsbG8=", "'text/plain' is not an image"),
    ("data:,hello", "base64 only"),
    ("data:image/png,rawbytes", "base64 only"),
    ("data:image/gif;base64,R0lGODlh", "'image/gif' is not an image"),
    ("data:image/png;base64,not base64!", "not valid base64"),
])
def test_what_is_not_a_base64_image_is_refused_saying_what_is_allowed(url, words):
    with pytest.raises(MediaError, match=words) as caught:
        decode_data_url(url, 1 << 20)
    assert caught.value.status == HTTPStatus.BAD_REQUEST


def test_an_image_past_max_image_bytes_is_413():
    data = encoded()
    with pytest.raises(MediaError, match=f"larger than max_image_bytes={len(data) - 1}") as caught:
        decode_data_url(data_url(data), len(data) - 1)
    assert caught.value.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    error = caught.value.at("messages[1].content[0]")
    assert error.status == 413 and error.body.error.param == "messages[1].content[0]"
    assert error.body.error.message.startswith("messages[1].content[0]: ")
