"""``autoglm bench soak``, run tiny against a live tiny server: the results file holds what the docs quote."""
from __future__ import annotations

import json
import os

import pytest

from autoglm.bench.cli import main
from autoglm.bench.soak.measure import big_prompt
from autoglm.bench.soak.report import p99_itl_ratio, requests_sent, rss_growth
from tests.server.live_server import make_chat_model, start_server

pytestmark = pytest.mark.timeout(120)


def test_big_prompts_have_exactly_the_asked_length():
    assert [len(big_prompt(chars)) for chars in (1, 19, 20, 21, 5000)] == [1, 19, 20, 21, 5000]


def test_soak_against_a_live_server_writes_both_phases_and_the_memory(tmp_path, capsys):
    server = start_server(make_chat_model(tmp_path / "model"), served_model_name="tiny-llama")
    limit = server.state.tokenizers.char_limit.max_chars
    output = tmp_path / "soak.json"
    try:
        code = main(["soak", "--base-url", server.url, "--server-pid", str(os.getpid()), "--victims", "2",
                     "--output-len", "8", "--phase-s", "1.5", "--big-prompt-chars", f"{limit - 1},{limit + 1}",
                     "--big-prompt-interval-s", "0.3", "--disconnect-interval-s", "0.2", "--output-json",
                     str(output)])
    finally:
        server.stop()
    assert code == 0
    document = json.loads(output.read_text())
    assert document["settings"]["model"] == "tiny-llama" and document["machine"]["cpu_count"] == os.cpu_count()
    baseline, hostile = document["baseline"], document["hostile"]
    assert set(baseline["statuses"]) == {"victim ok"}
    # Under the character limit: tokenized, then too long for the context; over it: refused before tokenizing.
    assert hostile["statuses"]["big prompt 400"] >= 2 and hostile["statuses"]["disconnect 200"] >= 1
    assert "victim failed" not in hostile["statuses"]
    assert baseline["itl"]["p99_ms"] > 0 and hostile["itl"]["p99_ms"] > 0
    assert requests_sent(document) == sum(baseline["statuses"].values()) + sum(hostile["statuses"].values())
    assert p99_itl_ratio(document) > 0 and rss_growth(document) is not None
    assert document["server_rss_bytes"]["before"] > 0
    assert "p99 ITL with / without the hostile load" in capsys.readouterr().out


def test_server_pid_without_base_url_is_a_usage_error(capsys):
    assert main(["soak", "--server-pid", "1"]) == 2
    assert "--server-pid" in capsys.readouterr().err
