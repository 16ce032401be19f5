"""``autoglm models promote|rollback|canary|load|unload|status`` against a server's model admin API: the bodies
sent, the tables printed, and one-line errors for a refused operation, a missing key and no server at all."""
from __future__ import annotations

import re
import socket

import pytest

from autoglm.cli.main import main
from tests.registry.fake_admin_server import FakeAdminServer, FakeModel, running

ADMIN_KEY = "agk-admin-key"


@pytest.fixture
def server():
    fake = FakeAdminServer(models={"shakespeare": FakeModel(versions={"1": "loaded", "2": "unloaded"},
                                                            stable="1")})
    with running(fake):
        yield fake


@pytest.fixture
def models(capsys):
    """Runs ``autoglm models ...``: (exit status, stdout, stderr)."""

    def run(*arguments: str) -> tuple[int, str, str]:
        status = main(["models", *arguments])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def version_rows(out: str) -> dict[str, list[str]]:
    """The version table's rows, by version: [state, in flight, aliases]."""
    rows = [line.split() for line in out.splitlines()[2:]]
    return {row[0]: row[1:] for row in rows}


def test_status_shows_each_version_its_state_and_aliases(server, models):
    status, out, _ = models("status", "--url", server.url)
    assert status == 0
    assert out.splitlines()[0] == "shakespeare  (aliases: stable=1)"
    assert version_rows(out) == {"1": ["loaded", "0", "stable"], "2": ["unloaded", "0", "-"]}


def test_load_promote_and_rollback_send_the_version_and_print_the_new_state(server, models):
    assert version_rows(models("load", "shakespeare", "2", "--url", server.url)[1])["2"][0] == "loaded"
    status, out, _ = models("promote", "shakespeare", "2", "--url", server.url)
    assert status == 0 and "(aliases: stable=2)" in out and version_rows(out)["2"][-1] == "stable"
    status, out, _ = models("rollback", "shakespeare", "--url", server.url)
    assert status == 0 and "(aliases: stable=1)" in out
    assert server.received == [("/admin/models/shakespeare/load", {"version": "2"}),
                               ("/admin/models/shakespeare/promote", {"version": "2"}),
                               ("/admin/models/shakespeare/rollback", {})]


def test_canary_sends_the_percentage_and_zero_clears_it(server, models):
    status, out, _ = models("canary", "shakespeare", "2", "25", "--url", server.url)
    assert status == 0 and "canary 2 at 25%" in out
    assert server.received[-1] == ("/admin/models/shakespeare/canary", {"version": "2", "percent": 25.0})
    assert "canary" not in models("canary", "shakespeare", "2", "0", "--url", server.url)[1].splitlines()[0]


def test_a_percentage_outside_0_to_100_is_refused_before_any_call(models, capsys):
    with pytest.raises(SystemExit):
        main(["models", "canary", "shakespeare", "2", "150"])
    assert "expected a percentage from 0 to 100, got '150'" in capsys.readouterr().err


def test_a_refused_operation_prints_the_servers_message(server, models):
    status, out, err = models("unload", "shakespeare", "1", "--url", server.url)
    assert status == 2 and out == ""
    assert err == (f"error: POST {server.url}/admin/models/shakespeare/unload answered 409: shakespeare@1 is "
                   "stable; promote another version first\n")


def test_status_of_a_model_the_server_lacks_names_those_it_serves(server, models):
    status, _, err = models("status", "poetry", "--url", server.url)
    assert status == 2 and err == f"error: the server at {server.url} serves no model 'poetry'; it serves: " \
                                  "shakespeare\n"


def test_the_admin_key_comes_from_the_flag_or_the_environment(server, models, monkeypatch):
    server.api_key = ADMIN_KEY
    status, _, err = models("status", "--url", server.url)
    assert status == 2
    assert err == (f"error: GET {server.url}/admin/models answered 401: this route needs an admin key; pass an "
                   "admin key with --api-key or the AUTOGLM_API_KEY variable\n")
    assert models("status", "--url", server.url, "--api-key", ADMIN_KEY)[0] == 0
    monkeypatch.setenv("AUTOGLM_API_KEY", ADMIN_KEY)
    assert models("promote", "shakespeare", "2", "--url", server.url)[0] == 0


def test_no_server_listening_says_how_to_start_one(models):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there
    status, _, err = models("status", "--url", url)
    assert status == 2
    assert err == (f"error: cannot reach the server at {url}: connection refused; start it with `autoglm serve` "
                   "or give its address with --url\n")


def test_a_server_serving_no_model_says_so(server, models):
    server.models.clear()
    status, out, err = models("status", "--url", server.url)
    assert status == 0 and out == "" and err == f"the server at {server.url} serves no model from the registry\n"


@pytest.mark.parametrize(("prefix", "error"), [
    ("/v1", r"GET {url}/v1/admin/models answered 404: .*Not Found.*"),
    ("/plain-text", r"{url}/plain-text/admin/models answered something other than JSON: b'hello'"),
    ("/other-api", r"the server at {url}/other-api answered GET /admin/models without a 'models' list: "
                   r"\{{'data': \[\]\}}; is it an autoglm server with the model admin API\?"),
])
def test_a_server_without_the_model_admin_api_is_reported(server, models, prefix, error):
    status, _, err = models("status", "--url", server.url + prefix)
    assert status == 2 and re.fullmatch(f"error: {error.format(url=re.escape(server.url))}\n", err), err
