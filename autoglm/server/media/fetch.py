"""Image URLs fetched over http(s): from allowed hosts only, redirects included, within the size and time limits.

Each connection goes to the address that was checked, not to a second lookup of the name, so a host cannot
pass the check with a public address and then be reached at a private one.
"""
from __future__ import annotations

import http.client
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urljoin, urlsplit

from autoglm.errors import quote_value
from autoglm.server.media.errors import MediaError, too_large
from autoglm.server.media.host_rules import HostRules

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
_CHUNK_BYTES = 64 * 1024
_ACCEPT = "image/png, image/jpeg, image/webp"

# A host and port to the addresses it resolves to; the tests give their own.
Resolver = Callable[[str, int], list[str]]


def resolve_addresses(host: str, port: int) -> list[str]:
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


@dataclass(frozen=True)
class ImageFetcher:
    hosts: HostRules
    timeout_s: float
    max_bytes: int
    resolve: Resolver = resolve_addresses

    def fetch(self, url: str) -> bytes:
        """The body of `url`, following at most MAX_REDIRECTS redirects, each to an allowed host."""
        deadline = time.monotonic() + self.timeout_s
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            self._check_allowed(parts)
            connection = self._connection(parts, deadline)
            try:
                connection.request("GET", _target(parts), headers={"Accept": _ACCEPT, "User-Agent": "autoglm"})
                sock = connection.sock  # the response keeps reading from it after a closing answer drops it here
                response = connection.getresponse()
                if response.status in _REDIRECTS:
                    location = response.getheader("Location")
                    if not location:
                        raise MediaError(f"the image URL answered HTTP {response.status} without a Location")
                    url = urljoin(url, location)
                    continue
                if response.status != 200:
                    raise MediaError(f"the image URL answered HTTP {response.status}, not 200")
                return self._body(response, sock, deadline)
            except TimeoutError:
                raise MediaError(f"fetching the image URL took longer than media_fetch_timeout_s="
                                 f"{self.timeout_s:g} seconds") from None
            except (OSError, http.client.HTTPException) as error:
                raise MediaError(f"the image URL could not be fetched: {error or type(error).__name__}") from None
            finally:
                connection.close()
        raise MediaError(f"the image URL redirected more than {MAX_REDIRECTS} times")

    def _check_allowed(self, parts: SplitResult) -> None:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MediaError(f"a redirect led to {quote_value(parts.geturl())}, not an http(s) URL with a host")
        if not self.hosts.patterns:
            raise MediaError("this server fetches no image URLs (allowed_media_domains is empty); send the image "
                             "inline as a data:image/png;base64,... URL")
        if not self.hosts.allows(parts.hostname):
            raise MediaError(f"the host {quote_value(parts.hostname)} is not in allowed_media_domains; image URLs "
                             f"may be fetched only from: {', '.join(self.hosts.patterns)}")

    def _connection(self, parts: SplitResult, deadline: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(parts.hostname, parts.port, timeout=_remaining(deadline))
        # http.client opens its socket through this attribute (for HTTPS too, before the TLS handshake).
        connection._create_connection = self._open_checked  # type: ignore[attr-defined]
        return connection

    def _open_checked(self, address: tuple[str, int], timeout: float,
                      source_address: tuple[str, int] | None = None) -> socket.socket:
        """A socket to the first address `host` resolves to, once no address it resolves to is off-limits."""
        host, port = address
        addresses = self.resolve(host, port)
        if not addresses:
            raise MediaError(f"the host {quote_value(host)} resolves to no address")
        if not self.hosts.named_exactly(host):
            hidden = next((found for found in addresses if not ipaddress.ip_address(found.split("%")[0]).is_global),
                          None)
            if hidden is not None:
                raise MediaError(f"the host {quote_value(host)} resolves to the non-public address {hidden}; only a "
                                 f"host named exactly in allowed_media_domains may be on a private network")
        return socket.create_connection((addresses[0], port), timeout, source_address)

    def _body(self, response: http.client.HTTPResponse, sock: socket.socket, deadline: float) -> bytes:
        declared = response.getheader("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise too_large("the image URL's answer", int(declared), self.max_bytes)
        chunks: list[bytes] = []
        size = 0
        while True:
            sock.settimeout(_remaining(deadline))
            chunk = response.read1(_CHUNK_BYTES)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_bytes:
                raise too_large("the image URL's answer", size, self.max_bytes)
            chunks.append(chunk)


def _target(parts: SplitResult) -> str:
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
