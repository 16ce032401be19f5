"""Images read from ``file://`` URLs, only from under allowed_local_media_path."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from autoglm.errors import quote_value
from autoglm.server.media.errors import MediaError, too_large


def read_local_image(url: str, root: str | None, max_bytes: int) -> bytes:
    """The file a ``file://`` URL names, once its real path (``..`` and symbolic links resolved) is inside
    `root`'s real path."""
    if root is None:
        raise MediaError("this server reads no file:// URLs (allowed_local_media_path is unset); send the image "
                         "inline as a data:image/png;base64,... URL")
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise MediaError(f"a file:// URL names a file on this server, not on {quote_value(parts.netloc)}")
    path = Path(unquote(parts.path)).resolve()
    if not path.is_relative_to(Path(root).resolve()):
        raise MediaError(f"file:// URLs may read only files under allowed_local_media_path ({root}), and "
                         f"{quote_value(unquote(parts.path))} is not under it")
    if not path.is_file():
        raise MediaError(f"there is no file {quote_value(unquote(parts.path))} under allowed_local_media_path")
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_large("the file", len(data), max_bytes)
    return data
