"""The tenants file: validated with errors naming the file, tenant and key; keys stored and found by hash."""
from __future__ import annotations

import re
from datetime import timedelta
from http import HTTPStatus
from pathlib import Path

import pytest

from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.file import Role, TenantsFileError, load_tenants_file, utc_now
from autoglm.server.tenants.keyring import KeyRing
from autoglm.server.tenants.keys import generate_key, hash_key
from tests.server.tenants_files import TenantsFixture


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tenants.yaml"
    path.write_text(text)
    return path


def load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(TenantsFileError) as raised:
        load_tenants_file(write(tmp_path, text))
    return str(raised.value)


def test_a_full_tenant_loads_with_its_defaults_filled(tmp_path):
    tenants = load_tenants_file(write(tmp_path, """
tenants:
  - id: team-a
    role: admin
    models: [tiny-llama]
    weight: 3
    limits: {requests_per_minute: 60, tokens_per_minute: 10000, max_concurrent_requests: 4,
             max_tokens_cap: 512, tokens_per_day: 1000000}
  - id: team-b
"""))
    team_a, team_b = tenants.tenants
    assert team_a.role is Role.ADMIN and team_a.weight == 3 and team_a.limits.max_tokens_cap == 512
    assert team_b.role is Role.USER and team_b.may_use("any-model") and team_b.limits.requests_per_minute is None
    assert not team_a.may_use("another-model")


def test_errors_name_the_file_the_tenant_and_the_field(tmp_path):
    message = load_error(tmp_path, "tenants:\n  - id: team-a\n    limits: {requests_per_minut: 3}\n    weight: 0\n")
    assert str(tmp_path / "tenants.yaml") in message
    assert "tenant 'team-a': limits.requests_per_minut: Extra inputs are not permitted" in message
    assert "tenant 'team-a': weight: Input should be greater than 0 (got 0)" in message


def test_a_bad_role_names_the_roles_allowed(tmp_path):
    message = load_error(tmp_path, "tenants:\n  - id: team-a\n    role: owner\n")
    assert re.search(r"tenant 'team-a': role: .*'reader', 'user' or 'admin'", message)


def test_errors_name_the_key(tmp_path):
    message = load_error(tmp_path, "tenants: [{id: a}]\nkeys:\n  - {id: k1, tenant: a, hash: abc, created: 2026-01-01}\n")
    assert "key 'k1': hash: String should match pattern" in message


def test_a_key_of_an_unknown_tenant_is_refused(tmp_path):
    fixture = TenantsFixture(tenants=[{"id": "a"}])
    fixture.add_key("k1", "b")
    with pytest.raises(TenantsFileError, match="key 'k1': tenant 'b' is not in the file; tenants: a"):
        load_tenants_file(fixture.write(tmp_path / "t.yaml"))


def test_a_key_may_narrow_its_tenants_role_but_not_widen_it(tmp_path):
    fixture = TenantsFixture(tenants=[{"id": "a", "role": "user"}])
    key = fixture.add_key("narrow", "a", role="reader")
    assert KeyRing(load_tenants_file(fixture.write(tmp_path / "t.yaml"))).authenticate(key).role is Role.READER
    fixture.add_key("wide", "a", role="admin")
    with pytest.raises(TenantsFileError, match="key 'wide': role 'admin' is above the role 'user' of its tenant 'a'"):
        load_tenants_file(fixture.write(tmp_path / "t.yaml"))


@pytest.mark.parametrize(("text", "problem"), [
    ("tenants: []\n", "names no tenants"),
    ("tenants: [{id: a}, {id: a}]\n", "tenant id 'a' appears more than once"),
    ("- a list\n", "must hold a mapping with 'tenants'"),
    ("tenants: [\n", "malformed tenants file"),
])
def test_a_malformed_file_says_what_is_wrong(tmp_path, text, problem):
    assert problem in load_error(tmp_path, text)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(TenantsFileError, match="tenants file not found: .*nowhere.yaml"):
        load_tenants_file(tmp_path / "nowhere.yaml")


def test_keys_are_random_prefixed_and_stored_as_sha256():
    first, second = generate_key(), generate_key()
    assert first != second
    assert re.fullmatch(r"agk-[A-Za-z0-9_-]{43}", first)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", hash_key(first)) and hash_key(first) != hash_key(second)


def test_a_key_expires_at_its_time(tmp_path):
    expires = utc_now() + timedelta(days=1)
    fixture = TenantsFixture(tenants=[{"id": "a"}])
    key = fixture.add_key("k", "a", expires=expires.isoformat())
    keyring = KeyRing(load_tenants_file(fixture.write(tmp_path / "t.yaml")))
    assert keyring.authenticate(key, now=expires - timedelta(seconds=1)).tenant.id == "a"
    with pytest.raises(APIError) as raised:
        keyring.authenticate(key, now=expires)
    assert raised.value.status == HTTPStatus.UNAUTHORIZED and "expired" in raised.value.body.error.message


def test_a_weight_must_be_finite_and_a_cache_salt_not_empty(tmp_path):
    message = load_error(tmp_path, "tenants:\n  - id: team-a\n    weight: .inf\n    cache_salt: ''\n")
    assert "tenant 'team-a': weight: Input should be a finite number" in message
    assert "tenant 'team-a': cache_salt: String should have at least 1 character" in message


@pytest.mark.parametrize("entry", [
    "  - id: k1  # the old key\n    tenant: a\n    hash: sha256:{hash}\n    created: 2026-01-05T09:30:00+00:00\n",
    "  - {id: k1, tenant: a, hash: 'sha256:{hash}', created: '2026-01-05T09:30:00+00:00'}  # the old key\n",
    "  - id: k1  # the old key\n    tenant: a\n    hash: sha256:{hash}\n    revoked: false\n"
    "    created: 2026-01-05T09:30:00+00:00\n",
])
def test_a_revocation_by_the_server_changes_only_the_keys_lines(tmp_path, entry):
    before = "# team a\ntenants:\n  - id: a\n    role: user  # as written\n    weight: 2\nkeys:\n"
    path = write(tmp_path, before + entry.replace("{hash}", "0" * 64) + "# end\n")
    keyring = KeyRing(load_tenants_file(path), path)
    assert keyring.revoke("k1").revoked and keyring.tenants.key("k1").revoked
    text = path.read_text()
    assert text.startswith(before) and text.endswith("# end\n") and "# the old key" in text
    assert load_tenants_file(path).key("k1").revoked
