"""``autoglm bench serve``: send times, metrics on hand-made timings, prompts, and runs against a live server."""
from __future__ import annotations

import json
import os
import random
import statistics

import numpy as np
import pytest

from autoglm.bench.cli import main
from autoglm.bench.lib.arrivals import send_times
from autoglm.bench.lib.datasets import (
    count_tokens,
    jsonl_requests,
    random_requests,
    shared_prefix_requests,
)
from autoglm.bench.lib.errors import ServeBenchError, import_extra
from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.serve_metrics import aggregate, percentile
from autoglm.bench.serve.plot import plot_paths
from autoglm.bench.serve.server_counters import PrefixCacheCounters, prefix_cache_report
from tests.server.live_server import free_port, make_chat_model, slow_down_steps, start_server
from tests.tiny_models import build_tiny_tokenizer

SERVED_NAME = "tiny-llama"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def strict_json(text: str) -> dict:
    """JSON as other languages read it: no Infinity or NaN."""
    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:])]


# ---- arrivals ---------------------------------------------------------------------
def test_send_times_are_fixed_by_the_seed():
    assert send_times(50, 4.0, seed=3) == send_times(50, 4.0, seed=3)
    assert send_times(50, 4.0, seed=3) != send_times(50, 4.0, seed=4)


def test_poisson_gaps_average_one_over_the_rate():
    times = send_times(5000, 5.0, seed=0)
    assert times[0] == 0.0 and times == sorted(times)
    assert statistics.mean(gaps(times)) == pytest.approx(0.2, rel=0.05)
    assert statistics.stdev(gaps(times)) / statistics.mean(gaps(times)) == pytest.approx(1.0, rel=0.1)


def test_infinite_rate_sends_everything_at_once():
    assert send_times(7, float("inf"), burstiness=0.3, seed=1) == [0.0] * 7


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_burstiness_changes_the_spread_not_the_mean(burstiness):
    intervals = gaps(send_times(5000, 10.0, burstiness=burstiness, seed=0))
    assert statistics.mean(intervals) == pytest.approx(0.1, rel=0.1)
    # Gamma gaps of shape k vary by 1/sqrt(k) of their mean: bursts below 1, evenness above.
    assert statistics.stdev(intervals) / statistics.mean(intervals) == pytest.approx(burstiness ** -0.5, rel=0.1)


def test_send_times_reject_a_rate_that_is_not_positive():
    with pytest.raises(ValueError, match="rate"):
        send_times(3, 0.0)


# ---- metrics ----------------------------------------------------------------------
def hand_made_results() -> list[RequestResult]:
    return [
        # TTFT 100 ms, TPOT (400 - 100) / 2 = 150 ms, gaps 100 and 200 ms, E2E 400 ms; usage counts.
        RequestResult(prompt_len=10, output_len=3, send_time=0.0, chunk_times=[0.1, 0.2, 0.4], end_time=0.4,
                      prompt_tokens=11, completion_tokens=3),
        # No usage: two text chunks are two tokens. TTFT 300, TPOT 200, gap 100, E2E 500 ms.
        RequestResult(prompt_len=5, output_len=2, send_time=1.0, chunk_times=[1.3, 1.4], end_time=1.5),
        # Failed midway: counted as failed, its timings nowhere.
        RequestResult(prompt_len=7, output_len=4, send_time=1.0, chunk_times=[1.01, 1.02], error="HTTP 500: boom"),
    ]


def test_aggregate_counts_tokens_and_rates_of_completed_requests():
    metrics = aggregate(hand_made_results(), duration_s=2.0)
    assert (metrics.completed, metrics.failed) == (2, 1)
    assert (metrics.total_input_tokens, metrics.total_output_tokens) == (11 + 5, 3 + 2)
    assert metrics.request_throughput == pytest.approx(1.0)
    assert metrics.output_throughput == pytest.approx(2.5)
    assert metrics.total_token_throughput == pytest.approx(21 / 2)
    assert metrics.good_requests is None and metrics.goodput is None


def test_aggregate_latency_percentiles_in_ms():
    metrics = aggregate(hand_made_results(), duration_s=2.0)
    assert (metrics.ttft.mean_ms, metrics.ttft.median_ms) == pytest.approx((200, 200))
    assert (metrics.ttft.p90_ms, metrics.ttft.p99_ms) == pytest.approx((280, 298))
    assert (metrics.tpot.mean_ms, metrics.tpot.median_ms) == pytest.approx((175, 175))
    assert (metrics.itl.mean_ms, metrics.itl.median_ms, metrics.itl.p99_ms) == pytest.approx((400 / 3, 100, 198))
    assert (metrics.e2el.mean_ms, metrics.e2el.median_ms) == pytest.approx((450, 450))


@pytest.mark.parametrize("slos, good", [
    ({"ttft": 150}, 1),
    ({"tpot": 200, "e2el": 500}, 2),  # bounds are inclusive
    ({"e2el": 450}, 1),
    ({"ttft": 50}, 0),
])
def test_goodput_counts_requests_meeting_every_slo(slos, good):
    metrics = aggregate(hand_made_results(), duration_s=2.0, slos_ms=slos)
    assert metrics.good_requests == good
    assert metrics.goodput == pytest.approx(good / 2.0)


def test_one_token_answers_have_no_tpot_and_pass_its_slo():
    result = RequestResult(prompt_len=4, output_len=1, send_time=0.0, chunk_times=[0.05], end_time=0.06)
    metrics = aggregate([result], duration_s=1.0, slos_ms={"tpot": 1})
    assert metrics.tpot.mean_ms is None and metrics.itl.mean_ms is None
    assert metrics.good_requests == 1


def test_all_failed_gives_zero_rates_and_no_latencies():
    failed = [RequestResult(prompt_len=None, output_len=4, send_time=0.0, error="ConnectError: refused")] * 3
    metrics = aggregate(failed, duration_s=0.5)
    assert (metrics.completed, metrics.failed, metrics.request_throughput) == (0, 3, 0.0)
    assert metrics.ttft.median_ms is None and metrics.e2el.p99_ms is None


def test_unknown_prompt_length_leaves_total_token_throughput_unknown():
    result = RequestResult(prompt_len=None, output_len=2, send_time=0.0, chunk_times=[0.1, 0.2], end_time=0.2)
    metrics = aggregate([result], duration_s=1.0)
    assert metrics.total_input_tokens is None and metrics.total_token_throughput is None
    assert metrics.output_throughput == pytest.approx(2.0)


def test_percentile_matches_numpy():
    values = [random.Random(0).expovariate(1.0) for _ in range(101)]
    for q in (0, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))


# ---- datasets ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(320)


@pytest.mark.parametrize("input_len", [1, 7, 64, 300])
def test_random_prompts_have_exact_token_lengths(tokenizer, input_len):
    requests = random_requests(tokenizer, 20, input_len, 5, 0.0, random.Random(input_len))
    assert [count_tokens(tokenizer, request.prompt) for request in requests] == [input_len] * 20
    assert [request.prompt_len for request in requests] == [input_len] * 20
    assert {request.output_len for request in requests} == {5}


def test_random_lengths_stay_within_the_range_ratio(tokenizer):
    requests = random_requests(tokenizer, 60, 40, 10, 0.5, random.Random(0))
    assert all(20 <= request.prompt_len <= 60 and 5 <= request.output_len <= 15 for request in requests)
    assert all(count_tokens(tokenizer, request.prompt) == request.prompt_len for request in requests)
    assert len({request.prompt_len for request in requests}) > 5
    assert random_requests(tokenizer, 60, 40, 10, 0.5, random.Random(0)) == requests


def test_shared_prefix_prompts_share_their_prefix_and_have_exact_lengths(tokenizer):
    requests = shared_prefix_requests(tokenizer, 10, 100, 12, 7, random.Random(0))
    assert {request.prompt_len for request in requests} == {112}
    assert all(count_tokens(tokenizer, request.prompt) == 112 for request in requests)
    assert count_tokens(tokenizer, os.path.commonprefix([request.prompt for request in requests])) >= 100
    assert len({request.prompt for request in requests}) == 10


def test_jsonl_prompts_in_file_order(tmp_path, tokenizer):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "Hello world"}\n\n{"prompt": "To be, or not", "output_len": 3, "id": 7}\n'
                    '{"prompt": "not read"}\n')
    requests = jsonl_requests(path, 2, 16, tokenizer=None)
    assert [(request.prompt, request.prompt_len, request.output_len) for request in requests] == [
        ("Hello world", None, 16), ("To be, or not", None, 3)]
    counted = jsonl_requests(path, 5, 16, tokenizer=tokenizer)
    assert [request.prompt_len for request in counted] == [
        count_tokens(tokenizer, text) for text in ("Hello world", "To be, or not", "not read")]


@pytest.mark.parametrize("bad_line, message", [
    ('{"prompt": "cut', "not valid JSON"),
    ('["a list"]', "JSON object"),
    ('{"text": "no prompt"}', '"prompt" must be a non-empty string'),
    ('{"prompt": ""}', '"prompt" must be a non-empty string'),
    ('{"prompt": "x", "output_len": 0}', '"output_len" must be a positive integer'),
    ('{"prompt": "x", "output_len": true}', '"output_len" must be a positive integer'),
])
def test_malformed_jsonl_lines_are_named_by_number(tmp_path, bad_line, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n\n' + bad_line + "\n")
    with pytest.raises(ServeBenchError, match="line 3") as error:
        jsonl_requests(path, 10, 16, tokenizer=None)
    assert message in str(error.value)


def test_jsonl_file_missing_or_empty(tmp_path):
    with pytest.raises(ServeBenchError, match="does not exist"):
        jsonl_requests(tmp_path / "absent.jsonl", 1, 16, tokenizer=None)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ServeBenchError, match="no prompts"):
        jsonl_requests(tmp_path / "empty.jsonl", 1, 16, tokenizer=None)


# ---- command line without a server ------------------------------------------------
def test_a_missing_extra_names_the_install_command():
    with pytest.raises(ServeBenchError, match=r"^--plot needs no_such_module: pip install 'open-autoglm\[bench\]'"):
        import_extra("no_such_module", "--plot")


def test_plot_paths_for_folders_and_prefixes(tmp_path):
    assert plot_paths(str(tmp_path) + "/charts/") == (tmp_path / "charts/latency_cdf.png",
                                                      tmp_path / "charts/rate_sweep.png")
    assert plot_paths(str(tmp_path)) == (tmp_path / "latency_cdf.png", tmp_path / "rate_sweep.png")
    assert plot_paths(str(tmp_path / "out/run1"))[0] == tmp_path / "out/run1_latency_cdf.png"
    assert plot_paths(str(tmp_path / "run2.png"))[1] == tmp_path / "run2_rate_sweep.png"


@pytest.mark.parametrize("option", [
    ["--goodput", "ttfb:100"], ["--request-rate", "2,0"], ["--random-range-ratio", "1"], ["--num-prompts", "0"],
])
def test_bad_options_are_refused_by_the_parser(option):
    with pytest.raises(SystemExit):
        main(["serve", *option])


def test_jsonl_dataset_needs_a_path(capsys):
    assert main(["serve", "--dataset", "jsonl", "--model", "m"]) == 2
    assert "--dataset-path" in capsys.readouterr().err


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": text}) + "\n" for text in ("Hello world", "To be", "The quick")))
    return path


def test_unreachable_server_gives_failed_requests_and_a_clear_message(tmp_path, prompts_file, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "result.json"
    code = main(["serve", "--base-url", url, "--model", "m", "--dataset", "jsonl", "--dataset-path", str(prompts_file),
                 "--request-rate", "100", "--output-json", str(out)])
    assert code == 1
    printed = capsys.readouterr().out
    assert "3 of 3 requests failed: ConnectError" in printed
    run = strict_json(out.read_text())["runs"][0]
    assert (run["metrics"]["completed"], run["metrics"]["failed"]) == (0, 3)
    assert run["metrics"]["ttft"]["median_ms"] is None
    assert all(not request["success"] and request["error"].startswith("ConnectError") for request in run["requests"])


def test_unreachable_server_without_model_says_what_to_do(capsys):
    assert main(["serve", "--base-url", f"http://127.0.0.1:{free_port()}", "--num-prompts", "2"]) == 2
    error = capsys.readouterr().err
    assert "could not list the served models" in error and "--model" in error


# ---- against a live server ----------------------------------------------------------
@pytest.fixture(scope="module")
def live(tmp_path_factory):
    model = make_chat_model(tmp_path_factory.mktemp("serve-bench-llama"))
    running = start_server(model, served_model_name=SERVED_NAME)
    yield running, model
    running.stop()


def test_random_prompts_at_two_rates_end_to_end(live, tmp_path, capsys):
    server, model = live
    out, plots = tmp_path / "result.json", tmp_path / "plots" / "run"
    code = main(["serve", "--base-url", server.url, "--num-prompts", "8", "--random-input-len", "16",
                 "--random-output-len", "6", "--request-rate", "40,inf", "--max-concurrency", "4",
                 "--goodput", "ttft:60000,e2el:60000", "--output-json", str(out), "--plot", str(plots),
                 "--tokenizer", str(model)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Successful requests" in printed and "P99 ITL (ms)" in printed
    report = strict_json(out.read_text())
    # Model from /v1/models; a served name names no folder, so the tokenizer is given.
    assert report["settings"]["model"] == SERVED_NAME
    assert report["settings"]["tokenizer"] == str(model)
    assert [run["request_rate"] for run in report["runs"]] == ["40", "inf"]
    for run in report["runs"]:
        metrics = run["metrics"]
        assert (metrics["completed"], metrics["failed"], metrics["good_requests"]) == (8, 0, 8)
        assert (metrics["total_input_tokens"], metrics["total_output_tokens"]) == (8 * 16, 8 * 6)
        assert metrics["ttft"]["median_ms"] > 0 and metrics["tpot"]["median_ms"] > 0
        for request in run["requests"]:
            assert request["success"]
            assert (request["prompt_len"], request["prompt_tokens"], request["completion_tokens"]) == (16, 16, 6)
            assert 1 <= len(request["chunk_times_s"]) <= 6
            assert request["send_time_s"] < request["chunk_times_s"][0] <= request["end_time_s"]
    for name in ("run_latency_cdf.png", "run_rate_sweep.png"):
        assert (plots.parent / name).read_bytes().startswith(PNG_MAGIC)


def test_jsonl_prompts_counted_by_the_server_one_at_a_time(live, prompts_file, tmp_path):
    server, _ = live
    out = tmp_path / "result.json"
    code = main(["serve", "--base-url", server.url, "--model", SERVED_NAME, "--dataset", "jsonl",
                 "--dataset-path", str(prompts_file), "--random-output-len", "4", "--max-concurrency", "1",
                 "--no-ignore-eos", "--output-json", str(out)])
    assert code == 0
    run = strict_json(out.read_text())["runs"][0]
    requests = sorted(run["requests"], key=lambda request: request["send_time_s"])
    assert all(request["prompt_len"] is None and request["prompt_tokens"] > 0 for request in requests)
    assert run["metrics"]["total_input_tokens"] == sum(request["prompt_tokens"] for request in requests)
    # One slot: each request goes out only once the one before has finished.
    assert all(later["send_time_s"] >= earlier["end_time_s"] for earlier, later in zip(requests, requests[1:]))


def test_a_model_the_server_does_not_name_needs_a_tokenizer(live, capsys):
    server, _ = live
    assert main(["serve", "--base-url", server.url, "--model", "another-model", "--num-prompts", "1"]) == 2
    assert "needs --tokenizer" in capsys.readouterr().err


def test_slow_requests_time_out_as_failures(live, prompts_file, monkeypatch, capsys):
    server, _ = live
    slow_down_steps(server, monkeypatch, step_s=0.05)
    code = main(["serve", "--base-url", server.url, "--model", SERVED_NAME, "--dataset", "jsonl",
                 "--dataset-path", str(prompts_file), "--random-output-len", "50", "--timeout-s", "0.3"])
    assert code == 1
    assert "3 of 3 requests failed: no complete answer within 0.3 s" in capsys.readouterr().out


def test_metrics_urls_give_each_run_the_servers_prefix_cache_hit_rate(live, tmp_path, capsys):
    server, model = live
    out = tmp_path / "result.json"
    code = main(["serve", "--base-url", server.url, "--dataset", "shared-prefix", "--shared-prefix-len", "64",
                 "--shared-prefix-question-len", "8", "--num-prompts", "4", "--random-output-len", "2",
                 "--max-concurrency", "1", "--tokenizer", str(model), "--metrics-url", server.url + "/metrics",
                 "--output-json", str(out)])
    assert code == 0
    cache = strict_json(out.read_text())["runs"][0]["prefix_cache"]
    # The first request fills the cache with the 64-token prefix's 4 blocks; the 3 after find them.
    assert cache["hits"] >= 3 * 64 and cache["queries"] >= 4 * 72
    assert cache["hit_rate"] == cache["hits"] / cache["queries"]
    assert cache["endpoints"] == [{"url": server.url + "/metrics", "queries": cache["queries"], "hits": cache["hits"]}]
    assert f"prefix cache hit rate: {cache['hit_rate']:.1%}" in capsys.readouterr().out


def test_a_run_that_looked_nothing_up_has_no_hit_rate():
    counters = PrefixCacheCounters(queries=10, hits=4)
    assert prefix_cache_report(["a"], [counters], [counters])["hit_rate"] is None
    report = prefix_cache_report(["a", "b"], [counters, counters],
                                 [PrefixCacheCounters(20, 9), PrefixCacheCounters(30, 4)])
    assert (report["queries"], report["hits"], report["hit_rate"]) == (30, 5, 5 / 30)


def test_several_shared_prefixes_are_taken_in_turn(tokenizer):
    requests = shared_prefix_requests(tokenizer, 6, 40, 8, 3, random.Random(0), num_prefixes=3)
    groups = [requests[index::3] for index in range(3)]
    shared = [count_tokens(tokenizer, os.path.commonprefix([r.prompt for r in group])) for group in groups]
    assert all(length >= 40 for length in shared)
    assert count_tokens(tokenizer, os.path.commonprefix([group[0].prompt for group in groups])) < 40
    # One prefix draws the same prompts as before there could be several.
    assert shared_prefix_requests(tokenizer, 4, 40, 8, 3, random.Random(0), num_prefixes=1) == \
        shared_prefix_requests(tokenizer, 4, 40, 8, 3, random.Random(0))
