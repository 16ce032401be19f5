"""Fetching image URLs: allowed hosts only (redirects too), public addresses unless the host is named exactly,
within the size and time limits. A local HTTP server on 127.0.0.1 plays the web."""
from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autoglm.server.media.errors import MediaError
from autoglm.server.media.fetch import ImageFetcher, resolve_addresses
from autoglm.server.media.host_rules import HostRules
from tests.server.media.images import encoded

IMAGE = encoded()
LIMIT = 10_000


class _Web(BaseHTTPRequestHandler):
    release = threading.Event()  # what a hanging answer waits for, set when the tests end

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        port = self.server.server_address[1]
        routes = {
            "/image.png": lambda: self._send(200, IMAGE),
            "/inside": lambda: self._redirect(f"http://127.0.0.1:{port}/image.png"),
            "/relative": lambda: self._redirect("/image.png"),
            "/outside": lambda: self._redirect(f"http://localhost:{port}/image.png"),
            "/loop": lambda: self._redirect("/loop"),
            "/declared-big": lambda: self._send(200, b"x" * (LIMIT + 1)),
            "/streamed-big": self._stream_big,
            "/hang": self._hang,
        }
        routes.get(self.path, lambda: self._send(404, b"no"))()

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _stream_big(self) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        for _ in range(LIMIT // 1000 + 2):
            self.wfile.write(b"y" * 1000)

    def _hang(self) -> None:
        self.release.wait(30)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    _Web.release.set()
    server.shutdown()
    server.server_close()


def fetcher(*hosts: str, timeout_s: float = 10.0, resolve=resolve_addresses) -> ImageFetcher:
    return ImageFetcher(HostRules(hosts), timeout_s, LIMIT, resolve)


@pytest.mark.parametrize("path", ["/image.png", "/inside", "/relative"])
def test_an_allowed_host_is_fetched_redirects_within_the_list_followed(web, path):
    assert fetcher("127.0.0.1").fetch(f"http://127.0.0.1:{web}{path}") == IMAGE


def test_a_host_outside_the_list_is_refused_naming_the_list(web):
    with pytest.raises(MediaError, match="'127.0.0.1' is not in allowed_media_domains; .* only from: example.com"):
        fetcher("example.com").fetch(f"http://127.0.0.1:{web}/image.png")
    with pytest.raises(MediaError, match="fetches no image URLs \\(allowed_media_domains is empty\\)"):
        fetcher().fetch(f"http://127.0.0.1:{web}/image.png")


def test_a_redirect_outside_the_list_is_refused(web):
    with pytest.raises(MediaError, match="'localhost' is not in allowed_media_domains"):
        fetcher("127.0.0.1").fetch(f"http://127.0.0.1:{web}/outside")
    with pytest.raises(MediaError, match="redirected more than 5 times"):
        fetcher("127.0.0.1").fetch(f"http://127.0.0.1:{web}/loop")


def test_a_private_address_is_refused_unless_the_host_is_named_exactly(web):
    def resolve(host: str, port: int) -> list[str]:
        assert host == "img.example.test"
        return ["127.0.0.1"]
    url = f"http://img.example.test:{web}/image.png"
    with pytest.raises(MediaError, match="resolves to the non-public address 127.0.0.1"):
        fetcher("*.example.test", resolve=resolve).fetch(url)
    assert fetcher("img.example.test", resolve=resolve).fetch(url) == IMAGE


@pytest.mark.parametrize("path", ["/declared-big", "/streamed-big"])
def test_an_answer_past_max_image_bytes_is_413(web, path):
    with pytest.raises(MediaError, match=f"larger than max_image_bytes={LIMIT}") as caught:
        fetcher("127.0.0.1").fetch(f"http://127.0.0.1:{web}{path}")
    assert caught.value.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE


def test_a_fetch_past_its_timeout_is_refused(web):
    with pytest.raises(MediaError, match="longer than media_fetch_timeout_s=0.2 seconds"):
        fetcher("127.0.0.1", timeout_s=0.2).fetch(f"http://127.0.0.1:{web}/hang")


def test_an_error_status_is_refused(web):
    with pytest.raises(MediaError, match="answered HTTP 404, not 200"):
        fetcher("127.0.0.1").fetch(f"http://127.0.0.1:{web}/missing")
