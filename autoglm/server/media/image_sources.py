"""Where an image part's URL may point: inline data, an allowed web host, or a file under the allowed folder."""
from __future__ import annotations

from autoglm.config.server import MediaConfig
from autoglm.errors import quote_value
from autoglm.server.media.data_url import decode_data_url
from autoglm.server.media.errors import MediaError
from autoglm.server.media.fetch import ImageFetcher, Resolver, resolve_addresses
from autoglm.server.media.host_rules import HostRules
from autoglm.server.media.local_files import read_local_image

URL_FORMS = "data:image/png|jpeg|webp;base64,..., http(s)://ALLOWED-HOST/... or file:///ALLOWED-FOLDER/..."


class ImageSources:
    """The encoded bytes of an image URL, in whichever of URL_FORMS it comes; blocking (fetching waits on the
    network), so it runs on a worker thread."""

    def __init__(self, config: MediaConfig, resolve: Resolver = resolve_addresses) -> None:
        self._config = config
        self._fetcher = ImageFetcher(HostRules(config.allowed_media_domains), config.media_fetch_timeout_s,
                                     config.max_image_bytes, resolve)

    def read(self, url: str) -> bytes:
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme == "data":
            return decode_data_url(url, self._config.max_image_bytes)
        if scheme in ("http", "https"):
            return self._fetcher.fetch(url)
        if scheme == "file":
            return read_local_image(url, self._config.allowed_local_media_path, self._config.max_image_bytes)
        raise MediaError(f"{quote_value(url)} is not an image URL this server reads; an image URL is one of: "
                         f"{URL_FORMS}")
