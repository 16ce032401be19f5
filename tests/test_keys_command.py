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


WRITTEN = """\
# who may use the server
tenants:
  - id: team            # the search team
    role: user
    models: [tiny-llama]
    weight: 2
keys:
  - id: k-old
    tenant: team
    hash: sha256:{hash}
    created: 2026-01-05T09:30:00+00:00

# end of file
""".replace("{hash}", "0" * 64)


def test_create_and_revoke_keep_what_the_user_wrote(tmp_path, capsys):
    path = tmp_path / "tenants.yaml"
    path.write_text(WRITTEN)
    create_key(path, capsys)
    new_id = next(key.id for key in load_tenants_file(path).keys if key.id != "k-old")
    assert main(["keys", "revoke", "k-old", "--file", str(path)]) == 0
    text = path.read_text()
    assert text.startswith(WRITTEN.split("keys:")[0])  # comments, role: user and weight: 2 as written
    assert "    created: 2026-01-05T09:30:00+00:00\n    revoked: true\n" in text
    assert text.index(f"  - id: {new_id}\n") > text.index("revoked: true") and text.endswith("\n# end of file\n")
    tenants = load_tenants_file(path)
    assert [(key.id, key.revoked) for key in tenants.keys] == [("k-old", True), (new_id, False)]


@pytest.mark.parametrize("keys", ["", "keys: []\n", "keys: []  # none yet\n"])
def test_the_first_key_goes_into_a_file_without_keys(tmp_path, capsys, keys):
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  - id: team  # kept\n" + keys)
    key = create_key(path, capsys)
    assert "- id: team  # kept\n" in path.read_text()
    assert KeyRing(load_tenants_file(path)).authenticate(key).tenant.id == "team"


@pytest.mark.parametrize("dash", ["", "  ", "    "])
def test_a_new_key_lines_up_with_the_keys_before_it(tmp_path, capsys, dash):
    path = tmp_path / "tenants.yaml"
    old_key = f"{dash}-   id: k-old\n{dash}    tenant: team\n{dash}    hash: sha256:{'0' * 64}\n" \
              f"{dash}    created: 2026-01-05T09:30:00+00:00\n"
    path.write_text(f"tenants:\n  - id: team  # kept\nkeys:\n{old_key}")
    create_key(path, capsys)
    assert path.read_text().startswith(f"tenants:\n  - id: team  # kept\nkeys:\n{old_key}{dash}- id: ")
    assert len(load_tenants_file(path).keys) == 2


def test_a_missing_file_says_how_to_make_it(tmp_path, capsys):
    path = tmp_path / "tenants.yaml"
    assert main(["keys", "create", "--tenant", "team", "--file", str(path)]) == 2
    assert "add --init" in capsys.readouterr().err and not path.exists()


def test_init_makes_the_file_for_its_owner_only(tmp_path, capsys):
    path = tmp_path / "tenants.yaml"
    key = create_key(path, capsys, "--init", "--role", "admin")
    assert path.stat().st_mode & 0o777 == 0o600
    principal = KeyRing(load_tenants_file(path)).authenticate(key)
    assert principal.tenant.id == "team" and principal.role is Role.ADMIN and principal.tenant.models == ("*",)
    second = create_key(path, capsys, "--init")  # an existing file is kept and added to
    assert KeyRing(load_tenants_file(path)).authenticate(second).role is Role.ADMIN


def test_init_refuses_an_id_yaml_would_misread(tmp_path, capsys):
    path = tmp_path / "tenants.yaml"
    assert main(["keys", "create", "--tenant", "a: b", "--init", "--file", str(path)]) == 2
    assert "tenant 'a: b'" in capsys.readouterr().err and not path.exists()
