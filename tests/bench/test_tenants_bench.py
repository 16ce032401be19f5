"""``autoglm bench tenants``: its tenants file, its figures computed from a hand-made results file, and one
real run on a tiny model."""
from __future__ import annotations

import argparse
import json
import math

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from autoglm.bench.tenants import report
from autoglm.bench.tenants.command import _weights
from autoglm.bench.tenants.tenants_file import UNREACHED_LIMITS, write_bench_tenants
from autoglm.server.tenants.file import load_tenants_file
from autoglm.server.tenants.keys import hash_key
from tests.bench.test_docs_figures import CPU
from tests.server.live_server import free_port_pair, make_chat_model


def phase(output_throughput: float, tenants: list[tuple[str, float, float, float]] = (),
          failed: int = 0) -> dict:
    """A phase's figures; each tenant as (name, weight, tokens while all backlogged, median TTFT ms)."""
    return {"metrics": {"output_throughput": output_throughput, "failed": failed},
            "tenants": [{"name": name, "weight": weight, "backlogged_tokens": tokens,
                         "metrics": {"ttft": {"median_ms": ttft}}} for name, weight, tokens, ttft in tenants],
            "backlogged_s": 12.0, "errors": ["HTTP 429: slow down"] if failed else []}


def document(victim_tokens: float = 100.0) -> dict:
    settings = {"overhead_prompts": 200, "rounds": 3, "victim_prompts": 4, "flood_prompts": 64}
    return {"settings": settings, "machine": CPU,
            "overhead": {"open": [phase(100.0), phase(104.0), phase(90.0)], "keyed": [phase(99.0), phase(98.0),
                                                                                    phase(110.0)]},
            "fairness": phase(0, [("A", 3.0, 290.0, 50.0), ("B", 1.0, victim_tokens, 50.0)]),
            "flood": {"alone": phase(0, [("B", 1.0, 0.0, 40.0)]),
                      "flooded": phase(0, [("A", 3.0, 0.0, 900.0), ("B", 1.0, 0.0, 50.0)])}}


def test_figures_are_computed_from_the_phases():
    figures = document()
    assert report.overhead(figures) == pytest.approx(1 - 99 / 100)  # medians of the rounds
    assert (report.served_split(figures), report.weight_split(figures)) == (pytest.approx(2.9), 3.0)
    assert report.flood_ttft_ratio(figures) == pytest.approx(1.25)
    assert report.failed_requests(figures) == 0
    lines = report.summary_lines(figures)
    assert "100.0 output tok/s without tenants, 99.0 with keys and limits: +1.00% lost (target: under 2%)" in lines[0]
    assert "tokens served A:B = 2.90:1, weights 3.00:1" in lines[1]
    assert lines[2] == "B's median TTFT: 40 ms alone, 50 ms beside A's flood (1.25x)"


def test_a_victim_served_nothing_while_both_waited_splits_infinitely():
    assert report.served_split(document(victim_tokens=0.0)) == math.inf
    starved = document()
    for tenant in starved["fairness"]["tenants"]:
        tenant["backlogged_tokens"] = 0.0
    with pytest.raises(ValueError, match="never had both tenants backlogged"):
        report.served_split(starved)


def test_the_tenants_table_and_inline_figures(tmp_path):
    (tmp_path / "tenants.json").write_text(json.dumps(document()))
    text = ("<!-- figures:tenants tenants.json -->\n<!-- /figures -->\n"
            "<!-- figure:tenants-overhead tenants.json --><!-- /figure --> lost, "
            "<!-- figure:tenants-split tenants.json --><!-- /figure --> split, "
            "<!-- figure:tenants-flood-ttft tenants.json --><!-- /figure --> TTFT.")
    rendered = render_document(text, tmp_path)
    assert "| the same with keys and limits | 99.0 tok/s (**-1.0%**) |" in rendered
    assert "| tokens served A:B while both were backlogged (12.0 s) | **2.90:1** (weights 3.00:1) |" in rendered
    assert "| the same beside A's flood of 64 | 50.0 ms (**1.25x**) |" in rendered
    assert "-->1.0%<!-- /figure --> lost, " in rendered and "-->2.90:1<!-- /figure --> split" in rendered
    assert "-->1.25x<!-- /figure --> TTFT." in rendered


def test_the_bench_writes_a_valid_tenants_file_holding_only_hashes(tmp_path):
    tenants = write_bench_tenants(tmp_path / "tenants.yaml", {"A": 3.0, "B": 1.0})
    loaded = load_tenants_file(tenants.path)
    assert [(tenant.id, tenant.weight, tenant.limits.model_dump()) for tenant in loaded.tenants] == [
        ("A", 3.0, UNREACHED_LIMITS), ("B", 1.0, UNREACHED_LIMITS)]
    assert [(key.tenant, key.hash) for key in loaded.keys] == [
        ("A", hash_key(tenants.keys["A"])), ("B", hash_key(tenants.keys["B"]))]
    assert tenants.keys["A"] not in tenants.path.read_text()
    assert tenants.path.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("text", ["3", "3:1:1", "3:0"])
def test_weights_are_two_positive_numbers(text):
    with pytest.raises(argparse.ArgumentTypeError):
        _weights(text)



@pytest.mark.slow
def test_the_bench_runs_end_to_end_on_a_tiny_model(tmp_path, capsys):
    """Two real servers, alternating throughput rounds, then fairness and flood on the keyed one: one results file."""
    model = make_chat_model(tmp_path / "model")
    out = tmp_path / "tenants.json"
    status = main(["tenants", "--model", str(model), "--port", str(free_port_pair()), "--input-len", "8",
                   "--output-len", "4", "--overhead-prompts", "6", "--rounds", "2", "--backlog-prompts", "6",
                   "--flood-prompts", "6", "--victim-prompts", "2", "--victim-rate", "20", "--victim-delay-s", "0.1",
                   "--max-num-seqs", "2", "--serve-args", "--max-context-len 64 --kv-cache-memory 4MiB",
                   "--output-json", str(out)])
    assert status == 0
    document = json.loads(out.read_text())
    assert len(document["overhead"]["open"]) == len(document["overhead"]["keyed"]) == 2
    assert [tenant["name"] for tenant in document["fairness"]["tenants"]] == ["A", "B"]
    assert "agk-" not in out.read_text() and "agk-" not in capsys.readouterr().out
