"""``autoglm bench ab``'s arithmetic: headline metrics from raw results, medians over rounds,
after/before ratios, direction-aware verdicts, the exit status, and the documents' table."""
from __future__ import annotations

import json
import re

import pytest

from autoglm.bench.ab.metrics import compare
from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from tests.bench.ab_documents import ab_document, latency_round, serve_round, throughput_round


def by_name(document):
    return {comparison.metric.name: comparison for comparison in compare(document)}


def test_rates_come_from_token_counts_and_medians_over_rounds():
    document = ab_document("throughput", [(throughput_round(10.0), throughput_round(8.0)),
                                          (throughput_round(50.0), throughput_round(9.0)),
                                          (throughput_round(12.5), throughput_round(100.0))])
    comparisons = by_name(document)
    assert list(comparisons) == ["mixed: output tok/s", "mixed: total tok/s"]
    output = comparisons["mixed: output tok/s"]
    assert output.before == pytest.approx(50 / 12.5)  # median of 5, 1 and 4 tok/s
    assert output.after == pytest.approx(50 / 9.0)
    assert output.ratio == pytest.approx(12.5 / 9.0)
    assert comparisons["mixed: total tok/s"].before == pytest.approx(150 / 12.5)


def test_every_workload_is_compared():
    rounds = [(throughput_round(10.0, ("mixed", "fixed")), throughput_round(10.0, ("mixed", "fixed")))]
    assert list(by_name(ab_document("throughput", rounds))) == [
        "mixed: output tok/s", "mixed: total tok/s", "fixed: output tok/s", "fixed: total tok/s"]


@pytest.mark.parametrize("after_elapsed_s, passes", [(10.5, True), (10.6, False), (5.0, True)])
def test_a_rate_passes_when_after_keeps_min_ratio_of_before(after_elapsed_s, passes):
    document = ab_document("throughput", [(throughput_round(10.0), throughput_round(after_elapsed_s))])
    assert by_name(document)["mixed: output tok/s"].passes(0.95) is passes  # 10 / 10.5 = 0.952


@pytest.mark.parametrize("after_ttft_s, passes", [(1.05, True), (1.06, False), (0.5, True)])
def test_a_time_passes_when_after_is_at_most_one_over_min_ratio_as_long(after_ttft_s, passes):
    document = ab_document("latency", [(latency_round(1.0, 20.0), latency_round(after_ttft_s, 20.0))])
    ttft = by_name(document)["128 prompt tokens: TTFT"]
    assert ttft.ratio == pytest.approx(after_ttft_s)
    assert ttft.passes(0.95) is passes  # at most 1 / 0.95 = 1.0526 times as long


def test_latency_compares_decode_rates():
    document = ab_document("latency", [(latency_round(1.0, 20.0), latency_round(1.0, 18.0))])
    decode = by_name(document)["128 prompt tokens: decode tok/s"]
    assert decode.ratio == pytest.approx(0.9) and not decode.passes(0.95) and decode.passes(0.9)


def test_serve_compares_time_to_first_token_and_output_rate_per_request_rate():
    rounds = [(serve_round(400.0, 30.0), serve_round(380.0, 31.0)), (serve_round(500.0, 28.0), serve_round(600.0, 27.0))]
    compared = by_name(ab_document("serve", rounds))
    assert list(compared) == ["rate inf: mean TTFT", "rate inf: median TTFT", "rate inf: output tok/s"]
    assert (compared["rate inf: mean TTFT"].before, compared["rate inf: mean TTFT"].after) == (0.45, 0.49)
    assert compared["rate inf: median TTFT"].after == 0.245
    assert compared["rate inf: output tok/s"].ratio == pytest.approx(29.0 / 29.0)
    assert not compared["rate inf: mean TTFT"].passes(0.95) and compared["rate inf: output tok/s"].passes(0.95)


def test_a_serve_round_with_failed_requests_is_refused():
    with pytest.raises(ValueError, match="1 requests failed at request rate inf"):
        compare(ab_document("serve", [(serve_round(400.0, 30.0, failed=1), serve_round(380.0, 31.0))]))


def test_sides_that_measured_different_things_are_refused():
    document = ab_document("throughput", [(throughput_round(10.0, ("mixed",)), throughput_round(10.0, ("fixed",)))])
    with pytest.raises(ValueError, match="the sides measured different things"):
        compare(document)


def test_a_metric_missing_from_one_round_is_refused():
    document = ab_document("throughput", [(throughput_round(10.0), throughput_round(10.0)),
                                          (throughput_round(10.0, ("fixed",)), throughput_round(10.0))])
    with pytest.raises(ValueError, match="before measured 'mixed: output tok/s' in 1 of 2 rounds"):
        compare(document)


@pytest.mark.parametrize("after_elapsed_s, code", [(10.0, 0), (20.0, 1)])
def test_the_exit_status_gates_on_every_metric(monkeypatch, tmp_path, capsys, after_elapsed_s, code):
    document = ab_document("throughput", [(throughput_round(10.0), throughput_round(after_elapsed_s))])
    monkeypatch.setattr("autoglm.bench.ab.checkouts.repository_root", lambda path: path)
    monkeypatch.setattr("autoglm.bench.ab.measure.measure_ab", lambda settings: document)
    output = tmp_path / "ab.json"
    assert main(["ab", "--before", "HEAD", "--output-json", str(output), "--", "throughput", "--model", "m"]) == code
    assert json.loads(output.read_text()) == document
    printed = capsys.readouterr().out
    assert "before: main (aaaaaaaaaa: the old engine); after: working tree (bbbbbbbbbb + uncommitted changes" in printed
    assert ("less than 0.95x as good as before on: mixed: output tok/s, mixed: total tok/s" in printed) is (code == 1)


@pytest.mark.parametrize("benchmark, message", [
    ([], "name the benchmark to compare, throughput, latency or serve, and its flags"),
    (["--", "soak"], r"throughput, latency or serve, and its flags \(got soak\)"),
    (["--", "throughput", "--output-json", "x.json"], "leave --output-json out of the benchmark's flags"),
    (["--", "serve", "--base-url=http://x"], "leave --base-url out of the benchmark's flags: ab starts each revision's own"),
])
def test_the_benchmark_must_be_one_ab_compares(capsys, benchmark, message):
    with pytest.raises(SystemExit):
        main(["ab", "--before", "HEAD", *benchmark])
    assert re.search(message, capsys.readouterr().err)


def test_the_documents_render_an_ab_file_as_a_table(tmp_path):
    document = ab_document("latency", [(latency_round(0.5, 20.0), latency_round(0.6, 21.0))])
    (tmp_path / "ab.json").write_text(json.dumps(document))
    rendered = render_document("<!-- figures:ab ab.json -->\n<!-- /figures -->", tmp_path)
    assert "Measured on AMD EPYC, 2 CPUs; torch 2.13.0+cpu ([`ab.json`](ab.json)):" in rendered
    assert "before: main (aaaaaaaaaa: the old engine); after: working tree" in rendered
    assert "| metric | before (aaaaaaaaaa) | after (bbbbbbbbbb) | after / before | at least 0.95x as good |" in rendered
    assert "| 128 prompt tokens: TTFT | 500 ms | 600 ms | 1.20x | FAIL |" in rendered
    assert "| 128 prompt tokens: decode tok/s | 20.0 tok/s | 21.0 tok/s | 1.05x | pass |" in rendered
