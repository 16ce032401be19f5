"""file:// images: only from under allowed_local_media_path, with no way out through .. or a symbolic link."""
from __future__ import annotations

from http import HTTPStatus

import pytest

from autoglm.server.media.errors import MediaError
from autoglm.server.media.local_files import read_local_image
from tests.server.media.images import encoded


@pytest.fixture
def folders(tmp_path):
    allowed, secret = tmp_path / "allowed", tmp_path / "secret"
    allowed.mkdir()
    secret.mkdir()
    (allowed / "shot.png").write_bytes(encoded())
    (secret / "key.png").write_bytes(encoded(color=(1, 2, 3)))
    (allowed / "link.png").symlink_to(secret / "key.png")
    return allowed, secret


def test_a_file_under_the_folder_is_read(folders):
    allowed, _ = folders
    assert read_local_image(f"file://{allowed}/shot.png", str(allowed), 1 << 20) == encoded()


@pytest.mark.parametrize("name", ["../secret/key.png", "link.png", "%2e%2e/secret/key.png"])
def test_no_way_out_of_the_folder(folders, name):
    allowed, _ = folders
    with pytest.raises(MediaError, match="only files under allowed_local_media_path"):
        read_local_image(f"file://{allowed}/{name}", str(allowed), 1 << 20)


def test_no_folder_no_file_urls_and_other_limits(folders):
    allowed, _ = folders
    with pytest.raises(MediaError, match="allowed_local_media_path is unset"):
        read_local_image(f"file://{allowed}/shot.png", None, 1 << 20)
    with pytest.raises(MediaError, match="there is no file .* under allowed_local_media_path"):
        read_local_image(f"file://{allowed}/missing.png", str(allowed), 1 << 20)
    with pytest.raises(MediaError, match="not on 'elsewhere'"):
        read_local_image(f"file://elsewhere{allowed}/shot.png", str(allowed), 1 << 20)
    with pytest.raises(MediaError, match="larger than max_image_bytes=10") as caught:
        read_local_image(f"file://{allowed}/shot.png", str(allowed), 10)
    assert caught.value.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
