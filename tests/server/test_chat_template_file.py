"""serve --chat-template FILE: the file's template replaces the tokenizer's; one that Jinja cannot parse stops the
start in one line naming the file and the error, exit status 2."""
from __future__ import annotations

import httpx

from autoglm.cli.main import main
from tests.server.live_server import start_server

TEMPLATE = ("{% for message in messages %}[{{ message['role'] }}] {{ message['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant] {% endif %}")


def test_the_files_template_is_the_one_served(chat_model, tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    server = start_server(chat_model, chat_template=str(template))
    try:
        assert httpx.get(server.url + "/tokenizer_info").json()["chat_template"] == TEMPLATE
        chat = httpx.post(server.url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        assert chat.status_code == 200
    finally:
        server.stop()


def test_a_template_jinja_cannot_parse_is_one_line_and_status_2(tmp_path, capsys):
    template = tmp_path / "broken.jinja"
    template.write_text("{% for message in messages %}{{ message.content }")
    assert main(["serve", "--chat-template", str(template)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(template) in error and "not a valid Jinja template" in error


def test_a_missing_template_file_is_named(tmp_path, capsys):
    assert main(["serve", "--chat-template", str(tmp_path / "nowhere.jinja")]) == 2
    assert "nowhere.jinja" in capsys.readouterr().err
