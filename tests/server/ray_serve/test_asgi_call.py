"""Running the server's app on a request whose body is already read: messages as sent, and a caller that leaves."""
from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from autoglm.server.ray_serve.asgi_call import call_asgi

pytestmark = pytest.mark.timeout(30)


def scope(path: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"localhost")], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}


def make_app(events: list[str]) -> Starlette:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"got": (await request.json())["text"]})

    async def count(request: Request) -> StreamingResponse:
        async def numbers():
            try:
                for number in range(1000):
                    yield f"{number}\n"
                    await asyncio.sleep(0.01)
            finally:
                events.append("stream closed")
        return StreamingResponse(numbers(), media_type="text/plain")

    async def fail(request: Request) -> JSONResponse:
        raise RuntimeError("broken route")

    return Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/count", count, methods=["POST"]),
                             Route("/fail", fail, methods=["POST"])])


def test_the_body_reaches_the_app_and_its_answer_comes_back_as_messages():
    async def run() -> list[dict]:
        return [message async for message in call_asgi(make_app([]), scope("/echo"), b'{"text": "hello"}')]

    messages = asyncio.run(run())
    assert messages[0]["type"] == "http.response.start" and messages[0]["status"] == 200
    assert b"".join(message.get("body", b"") for message in messages[1:]) == b'{"got":"hello"}'


def test_a_caller_that_stops_reading_ends_the_apps_stream():
    events: list[str] = []

    async def run() -> None:
        answer = call_asgi(make_app(events), scope("/count"), b"")
        start = await answer.__anext__()
        assert start["status"] == 200
        first = await answer.__anext__()
        assert first["body"] == b"0\n"
        await answer.aclose()
        for _ in range(6000):  # the app sees the disconnect and closes its generator (60 s: a hang guard)
            if events:
                return
            await asyncio.sleep(0.01)

    asyncio.run(run())
    assert events == ["stream closed"]


def test_an_app_that_fails_before_answering_raises_to_the_caller():
    async def broken(scope, receive, send) -> None:
        raise RuntimeError("broken app")

    async def run() -> list[dict]:
        return [message async for message in call_asgi(broken, scope("/any"), b"")]

    with pytest.raises(RuntimeError, match="broken app"):
        asyncio.run(run())


def test_an_app_that_fails_after_answering_is_logged_not_raised(caplog):
    async def run() -> list[dict]:
        return [message async for message in call_asgi(make_app([]), scope("/fail"), b"")]

    messages = asyncio.run(run())  # Starlette answers 500, then raises again for the server to log
    assert messages[0]["status"] == 500
    assert "the app failed after answering /fail" in caplog.text
