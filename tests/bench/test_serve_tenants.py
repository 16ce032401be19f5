"""``autoglm bench serve`` with keys and several tenants: the options, the per-tenant figures on hand-made
timings, and a run against a live server with a tenants file."""
from __future__ import annotations

import argparse
import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.tenant_load import tenant_keys, tenant_loads, tenant_rates, tenant_weights
from autoglm.bench.lib.tenant_metrics import (
    backlogged_shares,
    backlogged_windows,
    tenant_results,
    tokens_within,
    weight_shares,
)
from autoglm.bench.lib.tenant_load import TenantLoad
from tests.server.live_server import make_chat_model, start_server
from tests.server.tenants_files import TenantsFixture

SERVED_NAME = "tiny-llama"


# ---- options ------------------------------------------------------------------------
def test_tenants_take_weights_and_a_bare_name_weighs_one():
    assert tenant_weights("A:3,B") == {"A": 3.0, "B": 1.0}
    assert tenant_rates("A:inf,B:0.5") == {"A": float("inf"), "B": 0.5}


@pytest.mark.parametrize("parse, text, message", [
    (tenant_weights, "A:0", "tenant 'A': expected a number above 0"),
    (tenant_weights, "A:1,A:2", "tenant 'A' appears twice"),
    (tenant_rates, "A", "TENANT:RATE"),
    (tenant_keys, "A=k,:x", "TENANT=KEY"),
])
def test_bad_tenant_options_say_what_is_allowed(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)


def test_tenant_keys_from_a_file_of_lines(tmp_path):
    path = tmp_path / "keys"
    path.write_text("A=agk-one\n\nB=agk-two\n")
    assert tenant_keys(str(path)) == {"A": "agk-one", "B": "agk-two"}
    with pytest.raises(argparse.ArgumentTypeError, match="cannot read"):
        tenant_keys(str(tmp_path / "absent"))


def test_tenant_loads_fill_in_the_run_defaults_and_refuse_unknown_names():
    loads = tenant_loads({"A": 3.0, "B": 1.0}, {"B": 2.0}, {"A": 64}, {"A": "agk-a"}, 10, "agk-default")
    assert loads == [TenantLoad("A", 3.0, "agk-a", None, 64), TenantLoad("B", 1.0, "agk-default", 2.0, 10)]
    with pytest.raises(ServeBenchError, match=r"--tenant-rates names C, not in --tenants \(A, B\)"):
        tenant_loads({"A": 3.0, "B": 1.0}, {"C": 2.0}, {}, {}, 10, None)


def test_tenant_options_without_tenants_are_refused(capsys):
    assert main(["serve", "--model", "m", "--tenant-rates", "A:1", "--dataset", "jsonl", "--dataset-path", "x"]) == 2
    assert "--tenant-rates set what each tenant of --tenants sends" in capsys.readouterr().err


# ---- per-tenant figures -------------------------------------------------------------
def result(tenant: str, send: float, chunks: list[float], tokens: int | None = None) -> RequestResult:
    return RequestResult(4, len(chunks), send_time=send, chunk_times=chunks, end_time=chunks[-1],
                         completion_tokens=tokens, tenant=tenant)


def test_all_tenants_are_backlogged_only_while_each_has_a_request_waiting():
    results = {
        # A waits 0-1 and 2-4; B waits 0.5-3.
        "A": [result("A", 0.0, [1.0, 1.5]), result("A", 2.0, [4.0, 5.0])],
        "B": [result("B", 0.5, [3.0, 3.5])],
    }
    assert backlogged_windows(results) == [(0.5, 1.0), (2.0, 3.0)]


def test_tokens_inside_the_windows_count_each_chunks_share_of_its_request():
    # Two chunks carrying 6 tokens: 3 each; one chunk falls inside [1, 2).
    assert tokens_within([result("A", 0.0, [1.5, 2.5], tokens=6)], [(1.0, 2.0)]) == 3.0
    failed = RequestResult(4, 2, send_time=0.0, chunk_times=[1.5], error="HTTP 429: slow down", tenant="A")
    assert tokens_within([failed], [(1.0, 2.0)]) == 0


def test_each_tenant_gets_its_own_aggregates_and_backlogged_tokens():
    loads = [TenantLoad("A", 3.0, None, None, 3), TenantLoad("B", 1.0, None, 1.0, 1)]
    results = [result("A", 0.0, [0.5, 1.0, 1.5, 2.0]), result("A", 0.0, [2.5, 3.0]), result("A", 0.0, [3.5, 4.0]),
               result("B", 0.0, [1.2, 2.2])]
    tenants, backlogged_s = tenant_results(loads, {"A": float("inf"), "B": 1.0}, results, duration_s=4.0)
    assert [(tenant.name, tenant.metrics.completed, tenant.metrics.total_output_tokens) for tenant in tenants] == [
        ("A", 3, 8), ("B", 1, 2)]
    # Both waited over [0, 1.2): A's chunks at 0.5 and 1.0 fall inside, none of B's.
    assert backlogged_s == pytest.approx(1.2)
    assert [tenant.backlogged_tokens for tenant in tenants] == [2, 0]
    entries = [tenant.to_dict("inf") for tenant in tenants]
    assert backlogged_shares(entries) == {"A": 1.0, "B": 0.0}
    assert weight_shares(entries) == {"A": 0.75, "B": 0.25}


def test_tenants_never_backlogged_together_have_no_share():
    entries = [{"name": "A", "weight": 1, "backlogged_tokens": 0}, {"name": "B", "weight": 1, "backlogged_tokens": 0}]
    assert backlogged_shares(entries) is None


# ---- against a live server with a tenants file ----------------------------------------
@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-tenants")
    model = make_chat_model(folder / "model")
    tenants = TenantsFixture(tenants=[{"id": "A", "weight": 3}, {"id": "B", "weight": 1}])
    tenants.add_key("a-key", "A")
    tenants.add_key("b-key", "B")
    server = start_server(model, served_model_name=SERVED_NAME, tenants_file=str(tenants.write(folder / "t.yaml")))
    yield server, model, tenants.keys
    server.stop()


@pytest.mark.timeout(120)
def test_two_tenants_against_a_keyed_server_end_to_end(keyed, tmp_path, capsys):
    server, model, keys = keyed
    out = tmp_path / "tenants.json"
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"A={keys['a-key']}\nB={keys['b-key']}\n")
    code = main(["serve", "--base-url", server.url, "--tokenizer", str(model), "--random-input-len", "8",
                 "--random-output-len", "4", "--tenants", "A:3,B:1", "--tenant-prompts", "A:6,B:2",
                 "--tenant-rates", "B:50", "--tenant-keys", str(keys_file), "--output-json", str(out)])
    assert code == 0, capsys.readouterr()
    printed = capsys.readouterr().out
    assert "per tenant:" in printed and "Share by weight" in printed
    text = out.read_text()
    assert keys["a-key"] not in text and keys["b-key"] not in text
    report = json.loads(text)
    assert report["settings"]["model"] == SERVED_NAME  # listed with A's key
    assert report["settings"]["tenants"] == [
        {"name": "A", "weight": 3.0, "num_prompts": 6, "request_rate": None},
        {"name": "B", "weight": 1.0, "num_prompts": 2, "request_rate": "50"}]
    run = report["runs"][0]
    assert run["metrics"]["completed"] == 8
    tenants = {tenant["name"]: tenant for tenant in run["tenants"]}
    assert (tenants["A"]["request_rate"], tenants["B"]["request_rate"]) == ("inf", "50")
    assert [tenants[name]["metrics"]["total_output_tokens"] for name in "AB"] == [6 * 4, 2 * 4]
    assert all(tenants[name]["metrics"]["ttft"]["median_ms"] > 0 for name in "AB")
    assert sorted(request["tenant"] for request in run["requests"]) == ["A"] * 6 + ["B"] * 2
    # The first request of each tenant goes out at the start (B's rate spaces only its later ones), before any
    # first token: both tenants are backlogged together from then, never for longer than the run.
    assert 0 < run["backlogged_s"] < run["metrics"]["duration_s"]


def test_a_request_without_a_key_fails_with_the_servers_401(keyed, capsys):
    server, model, keys = keyed
    code = main(["serve", "--base-url", server.url, "--model", SERVED_NAME, "--tokenizer", str(model),
                 "--num-prompts", "1", "--random-input-len", "4", "--random-output-len", "2"])
    assert code == 1
    assert "HTTP 401" in capsys.readouterr().out
    assert main(["serve", "--base-url", server.url, "--model", SERVED_NAME, "--tokenizer", str(model),
                 "--num-prompts", "1", "--random-input-len", "4", "--random-output-len", "2",
                 "--api-key", keys["b-key"]]) == 0
