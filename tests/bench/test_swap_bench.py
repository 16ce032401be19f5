"""``autoglm bench swap``: its second version, its arithmetic on hand-made requests and switches, and one real
run on a tiny model whose results file holds what docs/MODELS.md quotes."""
from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from autoglm.bench.cli import main
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.swap import report
from autoglm.bench.swap.measure import Switch, SwapRun
from autoglm.bench.swap.versions import MODEL_NAME, perturbed_copy, register_versions
from autoglm.registry import DirectoryRegistry
from tests.server.live_server import free_port
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.timeout(120)

STREAMS = 4
PROMOTE = Switch(0, "promote", "swap@2", called_at=10.0, answered_at=10.1)
ROLLBACK = Switch(0, "rollback", "swap@1", called_at=20.0, answered_at=20.2)


def request(sent: float, first_token: float, served_by: tuple[str, ...], ended: float | None = None,
            error: str | None = None) -> RequestResult:
    return RequestResult(None, 8, send_time=sent, chunk_times=[first_token, first_token + 0.1],
                         end_time=None if error else (ended or first_token + 0.1), error=error,
                         served_by=list(served_by))


def test_the_first_target_token_counts_only_requests_sent_since_the_call():
    requests = [
        request(9.9, 10.05, ("swap@2",)),  # sent before the call: not the switch's doing
        request(10.0, 10.2, ("swap@1",)),  # routed before the switch took effect
        request(10.05, 10.4, ("swap@2",)),
        request(10.3, 10.35, ("swap@2",)),
    ]
    assert report.first_target_token(requests, PROMOTE) == 10.35
    document = report.switch_document(requests, PROMOTE)
    assert document["call_s"] == pytest.approx(0.1)
    assert document["call_to_first_token_s"] == pytest.approx(0.35)
    assert document["answer_to_first_token_s"] == pytest.approx(0.25)
    assert report.first_target_token(requests, ROLLBACK) is None


def test_requests_sent_after_an_answer_served_by_another_version_are_misrouted():
    requests = [
        request(10.05, 10.3, ("swap@1",)),  # sent before the answer: either version is right
        request(10.2, 10.3, ("swap@2",)),
        request(10.3, 10.4, ("swap@1",)),  # after the promote answered: misrouted
        request(20.1, 20.3, ("swap@2",)),  # before the rollback answered
        request(25.0, 25.1, ("swap@2",)),  # after it: misrouted
        request(26.0, 26.1, (), error="HTTP 503"),  # failed, counted as failed only
    ]
    assert report.misrouted(requests, [PROMOTE, ROLLBACK]) == 2


def test_requests_in_flight_across_a_switch_and_the_request_counts():
    requests = [
        request(5.0, 5.5, ("swap@1",), ended=15.0),  # spans the promote
        request(5.0, 5.5, ("swap@1",), ended=9.0),
        request(11.0, 11.5, ("swap@2", "swap@1")),  # changed version midway
        request(12.0, 12.5, (), error="no complete answer within 5 s"),
    ]
    assert report.in_flight_across(requests, PROMOTE) == 1
    counts = report.request_counts(SwapRun(requests, [PROMOTE]))
    assert counts == {"sent": 4, "failed": 1, "changed_version": 1, "misrouted": 0,
                      "by_version": {"swap@1": 2, "swap@2": 1}}


def test_the_summary_takes_median_and_max_per_operation_and_counts_problems():
    requests = [request(10.2, 10.5, ("swap@2",)), request(20.1, 20.3, ("swap@1",))]
    later_promote = Switch(1, "promote", "swap@2", called_at=30.0, answered_at=30.3)
    document = report.swap_document({}, None, SwapRun(requests, [PROMOTE, ROLLBACK, later_promote], [3.0, 1.0, 2.0]))
    promote = document["summary"]["promote"]
    assert promote["call_s"] == {"median": pytest.approx(0.2), "max": pytest.approx(0.3), "unmeasured": 0}
    assert promote["call_to_first_token_s"] == {"median": pytest.approx(0.5), "max": pytest.approx(0.5),
                                                "unmeasured": 1}
    assert document["summary"]["rollback"]["call_to_first_token_s"]["median"] == pytest.approx(0.3)
    assert document["summary"]["standby_load_s"] == {"median": 2.0, "max": 3.0, "unmeasured": 0}
    assert report.problems(document) == 1  # the later promote's target served nothing


def test_version_two_is_a_copy_with_other_weights_of_the_same_shapes(tmp_path):
    first = make_tiny_checkpoint("llama", tmp_path / "first", seed=1)
    second = perturbed_copy(first, tmp_path / "second", seed=0)
    assert sorted(path.name for path in first.iterdir()) == sorted(path.name for path in second.iterdir())
    original, copy = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert {name: (tensor.shape, tensor.dtype) for name, tensor in original.items()} == {
        name: (tensor.shape, tensor.dtype) for name, tensor in copy.items()}
    assert all(not original[name].equal(copy[name]) for name in original)
    register_versions(tmp_path / "registry", first, second)
    versions = DirectoryRegistry(tmp_path / "registry").versions(MODEL_NAME)
    assert [version.version for version in versions] == ["1", "2"]
    assert versions[0].sha256 != versions[1].sha256


def test_a_checkpoint_without_safetensors_needs_a_second_model(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ServeBenchError, match="--model-b"):
        perturbed_copy(tmp_path / "empty", tmp_path / "copy", seed=0)


def test_the_bench_swaps_under_load_on_a_tiny_model(tmp_path, capsys):
    """A real server; two rounds of promote and rollback with streams in flight: nothing fails or strays."""
    model = make_tiny_checkpoint("llama", tmp_path / "model", seed=1)
    out = tmp_path / "swap.json"
    status = main(["swap", "--model", str(model), "--port", str(free_port()), "--streams", str(STREAMS),
                   "--output-len", "64", "--rounds", "2", "--settle-s", "0.5", "--serve-args",
                   "--max-context-len 256 --kv-cache-memory 4MiB", "--output-json", str(out)])
    assert status == 0, capsys.readouterr().out
    document = json.loads(out.read_text())
    assert [(switch["operation"], switch["target"]) for switch in document["switches"]] == [
        ("promote", "swap@2"), ("rollback", "swap@1")] * 2
    # A switch has at most every stream and the previous switch's probe in flight across it, and streams of
    # 64 engine steps are out across the switches (the first may come before a loaded machine starts them).
    in_flight = [switch["in_flight_across"] for switch in document["switches"]]
    assert all(count <= STREAMS + 1 for count in in_flight) and max(in_flight) >= 1, document["switches"]
    counts = document["requests"]
    assert (counts["failed"], counts["changed_version"], counts["misrouted"]) == (0, 0, 0)
    assert set(counts["by_version"]) == {"swap@1", "swap@2"}
    rollback = document["summary"]["rollback"]["call_to_first_token_s"]
    assert rollback["unmeasured"] == 0 and 0 < rollback["median"] <= rollback["max"]
    assert len(document["standby_loads_s"]) == 1 and document["machine"]["cpu_count"] > 0
    assert "from the call to the warm version 1's first token" in capsys.readouterr().out
