"""A 400 that quotes a client's value quotes a short prefix of it, so a huge value gets a small answer."""
from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.timeout(60)

MEGABYTE = 1 << 20
# An error body of OpenAI's four fields with a message quoting a prefix fits well within this.
MAX_ERROR_BODY_BYTES = 2048
HUGE = "x" * MEGABYTE


@pytest.mark.parametrize("path, body, status", [
    ("/v1/completions", {"prompt": "Hi", "stop": [HUGE, ""]}, 400),  # refused by SamplingParams
    ("/v1/completions", {"prompt": "Hi", "stop": [HUGE, 7]}, 400),  # refused by the request's schema
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "stop": [HUGE, ""]}, 400),
    ("/v1/completions", {"prompt": "Hi", "logit_bias": {HUGE: 1}}, 400),
    ("/v1/completions", {"prompt": "Hi", HUGE: 1}, 400),
    ("/v1/completions", {"prompt": "Hi", "model": HUGE}, 404),
])
def test_an_error_quoting_a_megabyte_value_is_small(server, path, body, status):
    response = httpx.post(server.url + path, json=body, timeout=30)
    assert response.status_code == status
    assert len(response.content) < MAX_ERROR_BODY_BYTES
    assert "xxxxxxxx" in response.json()["error"]["message"]


def test_an_unknown_long_url_is_quoted_by_its_prefix(server):
    response = httpx.get(server.url + "/" + "x" * 8000, timeout=30)
    assert response.status_code == 404
    assert len(response.content) < MAX_ERROR_BODY_BYTES
    assert "unknown URL: GET '/xxxxxxxx" in response.json()["error"]["message"]
