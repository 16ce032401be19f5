"""What an operator expects of an HTTP server: request counters, HEAD /health, CORS, docs, Host checks."""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from autoglm.kernels import cpu_extension
from autoglm.server.http.trusted_hosts import LOCALHOST_NAMES, default_allowed_hosts, host_allowed, host_name
from tests.server.live_server import RunningServer, start_server, wait_until
from tests.server.test_errors import error_of

pytestmark = pytest.mark.timeout(60)

APP_ORIGIN = "http://app.example"
PREFLIGHT = {"Origin": APP_ORIGIN, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "content-type"}


@pytest.fixture(scope="module")
def configured(chat_model) -> Iterator[RunningServer]:
    """CORS for one origin, no docs pages, and a Host allow-list naming a public name."""
    running = start_server(chat_model, cors_allowed_origins=[APP_ORIGIN], enable_api_docs=False,
                           allowed_hosts=["api.example", "127.0.0.1"])
    yield running
    running.stop()


def http_requests(server: RunningServer, route: str, status: int) -> float:
    return server.metrics().get(f"autoglm:http_requests_total{{route={route},status={status}}}", 0.0)


def test_requests_are_counted_by_route_and_status(server):
    expected = {("/health", 200): 1, ("/v1/completions", 400): 1, ("unmatched", 404): 1, ("/v1/completions", 413): 1,
                ("/v1/models", 405): 1}
    before = {key: http_requests(server, *key) for key in expected}
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "top_p": 0}).status_code == 400
    assert httpx.get(server.url + "/no/such/page").status_code == 404
    assert httpx.post(server.url + "/v1/completions", content=b"x" * 3_000_000, timeout=30).status_code == 413
    assert httpx.post(server.url + "/v1/models").status_code == 405

    def all_counted() -> bool:
        return all(http_requests(server, *key) == before[key] + count for key, count in expected.items())

    assert wait_until(all_counted)


def test_head_health_answers_without_a_body(server):
    response = httpx.head(server.url + "/health")
    assert (response.status_code, response.content) == (200, b"")


class BuildUnderWay:
    """The kernels' build as a server meets it on a first start: nothing loaded yet."""

    module = None
    failed = False


def test_health_says_where_the_cpu_kernels_stand(server, monkeypatch):
    status = cpu_extension.cpu_kernel_status()
    assert httpx.get(server.url + "/health").json() == {"cpu_kernels": status}
    assert status == "ready" or status.startswith("unavailable: ")
    monkeypatch.setattr(cpu_extension, "_build", BuildUnderWay())
    monkeypatch.setattr(cpu_extension, "_unavailable", None)
    monkeypatch.setattr(cpu_extension, "estimated_build_seconds", lambda spec, root: 70.0)
    detail = httpx.get(server.url + "/health").json()["cpu_kernels"]
    assert detail.startswith("building (about 70 s, started ") and detail.endswith(" s ago)")


def test_cors_is_off_by_default(server):
    response = httpx.options(server.url + "/v1/chat/completions", headers=PREFLIGHT)
    assert response.status_code == 405 and "access-control-allow-origin" not in response.headers
    response = httpx.get(server.url + "/health", headers={"Origin": APP_ORIGIN})
    assert "access-control-allow-origin" not in response.headers


def test_cors_allows_the_configured_origin_only(configured):
    response = httpx.options(configured.url + "/v1/chat/completions", headers=PREFLIGHT)
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == APP_ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    other = httpx.options(configured.url + "/v1/chat/completions", headers={**PREFLIGHT, "Origin": "http://evil.example"})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_docs_pages_can_be_turned_off(server, configured):
    for page in ("/docs", "/redoc"):
        assert httpx.get(server.url + page).status_code == 200
        assert httpx.get(configured.url + page).status_code == 404
    assert httpx.get(configured.url + "/openapi.json").status_code == 200


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000", "LOCALHOST"])
def test_a_loopback_server_answers_to_localhost_names(server, host):
    assert httpx.get(server.url + "/health", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.evil.example"])
def test_a_loopback_server_refuses_other_host_names(server, host):
    response = httpx.get(server.url + "/health", headers={"Host": host})
    assert response.status_code == 400
    error = error_of(response)
    assert (error["param"], error["code"]) == ("Host", "invalid_host")
    assert "allowed_hosts" in error["message"] and "localhost" in error["message"]


def test_configured_host_names_are_accepted_and_others_refused(configured):
    assert httpx.get(configured.url + "/health", headers={"Host": "api.example:443"}).status_code == 200
    assert httpx.get(configured.url + "/health", headers={"Host": "localhost"}).status_code == 400


def test_models_list_names_the_model_without_its_folder(server, chat_model):
    response = httpx.get(server.url + "/v1/models")
    assert str(chat_model) not in response.text
    assert [(card["id"], card["root"]) for card in response.json()["data"]] == [("tiny-llama", "tiny-llama")]


@pytest.mark.parametrize("bind, allowed", [
    ("127.0.0.1", LOCALHOST_NAMES), ("127.0.0.2", LOCALHOST_NAMES), ("::1", LOCALHOST_NAMES),
    ("localhost", LOCALHOST_NAMES), ("0.0.0.0", ("*",)), ("::", ("*",)), ("10.1.2.3", ("*",)),
    ("server.example", ("*",)),
])
def test_default_allowed_hosts_follow_the_bind_address(bind, allowed):
    assert default_allowed_hosts(bind) == allowed


@pytest.mark.parametrize("header, name", [
    ("Example.com:8000", "example.com"), ("[::1]:8000", "[::1]"), ("[::1]", "[::1]"), ("localhost", "localhost"),
])
def test_host_name_drops_the_port(header, name):
    assert host_name(header) == name


def test_host_patterns():
    assert host_allowed("api.example.com", ("*.example.com",))
    assert not host_allowed("example.com.evil", ("*.example.com",))
    assert host_allowed("anything", ("*",))
    assert host_allowed("api.example", ("API.example",))
