"""Clients that send too much, too slowly or too often: refused in OpenAI's shape, and the server keeps serving."""
from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server.live_server import (
    RunningServer,
    long_completion,
    slow_down_steps,
    sse_payloads,
    start_server,
    wait_until,
)
from tests.server.test_errors import assert_still_serving, error_of

pytestmark = pytest.mark.timeout(60)

THREE_MB = 3 * 1000**2
# Short enough for a test to wait out, long enough for any machine to send a request in time.
GUARD_TIMEOUT_S = 1.0
# How long a trickling client keeps trying before the test calls the server stuck.
HANG_LIMIT_S = 30.0


@pytest.fixture(scope="module")
def guarded(chat_model) -> Iterator[RunningServer]:
    running = start_server(chat_model, header_read_timeout_s=GUARD_TIMEOUT_S, body_read_timeout_s=GUARD_TIMEOUT_S)
    yield running
    running.stop()


def connect(server: RunningServer) -> socket.socket:
    address = urlsplit(server.url)
    return socket.create_connection((address.hostname, address.port), timeout=10)


def trickle_until_closed(connection: socket.socket, data: bytes, interval_s: float = 0.25) -> bytes:
    """Send `data` a byte every `interval_s` until the server closes the connection; what it answered meanwhile."""
    connection.settimeout(interval_s)
    answer = b""
    deadline = time.monotonic() + HANG_LIMIT_S
    for byte in data:
        assert time.monotonic() < deadline, f"the server kept a trickling connection open for {HANG_LIMIT_S} s"
        try:
            received = connection.recv(65536)
            if not received:
                return answer
            answer += received
        except TimeoutError:
            pass
        except ConnectionResetError:
            return answer
        try:
            connection.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return answer
    raise AssertionError("the test ran out of bytes to trickle before the server closed the connection")


def read_until_closed(connection: socket.socket) -> bytes:
    answer = b""
    while received := connection.recv(65536):
        answer += received
    return answer


def test_a_body_past_the_limit_is_413_and_the_server_keeps_serving(server):
    body = json.dumps({"prompt": "x" * THREE_MB, "max_tokens": 1}).encode()
    response = httpx.post(server.url + "/v1/completions", content=body, timeout=30,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    error = error_of(response)
    assert (error["type"], error["code"]) == ("invalid_request_error", "request_too_large")
    assert f"{len(body)} bytes" in error["message"] and "2097152" in error["message"]
    assert_still_serving(server)


def test_a_declared_size_past_the_limit_is_answered_before_any_body_is_sent(server):
    with connect(server) as connection:
        connection.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 3000000\r\n\r\n")
        assert connection.recv(65536).startswith(b"HTTP/1.1 413 ")


def test_a_chunked_body_past_the_limit_is_413_and_the_connection_serves_on(server):
    def chunks() -> Iterator[bytes]:  # no Content-Length: the size shows only as it arrives
        yield b'{"prompt": "'
        for _ in range(30):
            yield b"x" * 100_000
        yield b'"}'

    with httpx.Client(base_url=server.url, timeout=30) as client:
        response = client.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})
        assert response.status_code == 413 and error_of(response)["code"] == "request_too_large"
        assert response.request.headers["transfer-encoding"] == "chunked"
        assert client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 2}).status_code == 200


def test_headers_sent_a_byte_at_a_time_get_the_connection_closed(guarded):
    with connect(guarded) as connection:
        answer = trickle_until_closed(connection, b"GET /health HTTP/1.1\r\nX-Padding: " + b"a" * 1000)
    assert answer == b""  # nothing to answer: there was no request yet
    assert_still_serving(guarded)


def test_a_body_sent_a_byte_at_a_time_is_408_and_the_connection_closed(guarded):
    with connect(guarded) as connection:
        connection.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 1000\r\n\r\n")
        answer = trickle_until_closed(connection, b"x" * 1000)
    assert answer.startswith(b"HTTP/1.1 408 ")
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "request_timeout" and "body_read_timeout_s" in error["message"]
    assert_still_serving(guarded)


def test_a_stream_outlasting_the_read_timeouts_is_not_cut(guarded, monkeypatch):
    slow_down_steps(guarded, monkeypatch, step_s=0.05)  # 40 tokens: 2 s, twice the timeouts
    body = long_completion(max_tokens=40, stream=True)
    with httpx.stream("POST", guarded.url + "/v1/completions", json=body, timeout=30) as response:
        payloads = sse_payloads(response)
    assert payloads[-1] == "[DONE]"
    finish_reasons = [choice["finish_reason"] for payload in payloads[:-1] for choice in json.loads(payload)["choices"]]
    assert finish_reasons[-1] == "length"


def test_connections_past_the_cap_are_refused_with_503(chat_model):
    running = start_server(chat_model, max_connections=2)
    assert wait_until(lambda: not running.server.server_state.connections)  # start_server's probes are gone
    held = [connect(running) for _ in range(2)]
    try:
        assert wait_until(lambda: len(running.server.server_state.connections) == 2)
        with connect(running) as refused:
            answer = read_until_closed(refused)
        assert answer.startswith(b"HTTP/1.1 503 ")
        error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
        assert error["code"] == "too_many_connections" and "max_connections" in error["message"]
        held.pop().close()
        assert wait_until(lambda: len(running.server.server_state.connections) == 1)
        assert httpx.get(running.url + "/health").status_code == 200
    finally:
        for connection in held:
            connection.close()
        running.stop()
