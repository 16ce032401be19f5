"""``autoglm keys``: a key is printed once, its hash written; revoke and list by id; the key never listed."""
from __future__ import annotations

import re

import pytest

from autoglm.cli.main import main
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.file import Role, load_tenants_file
from autoglm.server.tenants.keyring import KeyRing


@pytest.fixture
def tenants_file(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  - id: team\n    role: user\n    models: [tiny-llama]\n")
    return path


def create_key(tenants_file, capsys, *flags: str) -> str:
    assert main(["keys", "create", "--tenant", "team", "--file", str(tenants_file), *flags]) == 0
    return capsys.readouterr().out.strip()


def test_create_prints_the_key_once_and_writes_only_its_hash(tenants_file, capsys):
    key = create_key(tenants_file, capsys, "--role", "reader", "--expires", "30")
    assert key.startswith("agk-") and key not in tenants_file.read_text()
    tenants = load_tenants_file(tenants_file)
    principal = KeyRing(tenants).authenticate(key)
    assert principal.tenant.id == "team" and principal.role is Role.READER
    stored = tenants.keys[0]
    assert round((stored.expires - stored.created).total_seconds()) == 30 * 24 * 3600
    assert tenants.tenants[0].models == ("tiny-llama",)  # the rest of the file kept


def test_list_shows_ids_and_states_never_keys_or_hashes(tenants_file, capsys):
    key = create_key(tenants_file, capsys)
    assert main(["keys", "list", "--file", str(tenants_file)]) == 0
    listing = capsys.readouterr().out
    stored = load_tenants_file(tenants_file).keys[0]
    assert stored.id in listing and "active" in listing and "user" in listing
    assert key not in listing and stored.hash.removeprefix("sha256:") not in listing


def test_a_revoked_key_is_refused_and_listed_as_revoked(tenants_file, capsys):
    tenants_file.chmod(0o640)
    key = create_key(tenants_file, capsys)
    key_id = load_tenants_file(tenants_file).keys[0].id
    assert main(["keys", "revoke", key_id, "--file", str(tenants_file)]) == 0
    with pytest.raises(APIError, match="revoked"):
        KeyRing(load_tenants_file(tenants_file)).authenticate(key)
    main(["keys", "list", "--file", str(tenants_file)])
    assert "revoked" in capsys.readouterr().out
    assert tenants_file.stat().st_mode & 0o777 == 0o640  # rewritten with the mode it had


@pytest.mark.parametrize(("argv", "problem"), [
    (["create", "--tenant", "nobody"], "no tenant 'nobody' in .*; tenants: team"),
    (["create", "--tenant", "team", "--role", "admin"], "role 'admin' is above the role 'user' of its tenant 'team'"),
    (["revoke", "k-none"], "no key 'k-none' in .*; keys: none"),
])
def test_a_bad_request_names_what_is_allowed(tenants_file, capsys, argv, problem):
    before = tenants_file.read_text()
    assert main(["keys", *argv, "--file", str(tenants_file)]) == 2
    assert re.search(problem, capsys.readouterr().err)
    assert tenants_file.read_text() == before


def test_expires_must_be_a_positive_number_of_days(tenants_file):
    with pytest.raises(SystemExit):
        main(["keys", "create", "--tenant", "team", "--expires", "0", "--file", str(tenants_file)])
