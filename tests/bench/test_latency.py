"""``autoglm bench latency``: the arithmetic of TTFT and decode rates, the prompts, and runs of
the command on a tiny model, with and without the transformers baseline and a roofline."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.latency.measure import DecodeBounds, LatencyResult, latency_ratios, latency_requests
from autoglm.bench.results.roofline import MatmulRate, Roofline, WeightFormat, count_weights
from tests.bench.test_roofline import ROOFLINE, WEIGHTS
from tests.tiny_models import make_tiny_checkpoint

SIDE_KEYS = {"compute_dtype", "weight_dtype", "output_len", "ttft_s", "e2e_s", "mean_ttft_s", "median_ttft_s",
             "decode_tokens_per_s", "decode_bound_tokens_per_s", "decode_fraction_of_bound"}
TINY_RUN = ["--output-len", "8", "--num-threads", "1"]  # 7 decode steps: well above timer noise


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("tiny"))  # 512 positions


@pytest.fixture(scope="module")
def roofline_file(tmp_path_factory):
    roofline = Roofline("cpu", 1, "float32", 2e9, 3e9, [MatmulRate("float32", 1, 8, 8, 1e9)])
    path = tmp_path_factory.mktemp("roofline") / "roofline.json"
    path.write_text(json.dumps(roofline.to_dict()))
    return path


# ---- arithmetic ----------------------------------------------------------------------
def test_ttft_and_decode_rate_from_timed_requests():
    result = LatencyResult("float32", "float32", output_len=11, ttft_s=[0.1, 0.3, 0.2], e2e_s=[1.1, 1.4, 1.1])
    assert (result.mean_ttft_s, result.median_ttft_s) == pytest.approx((0.2, 0.2))
    assert result.decode_tokens_per_s == pytest.approx(10 / (1.2 - 0.2))


def test_a_decode_faster_than_the_clock_is_an_error():
    with pytest.raises(RuntimeError, match="raise --output-len"):
        _ = LatencyResult("float32", "float32", output_len=2, ttft_s=[0.5], e2e_s=[0.5]).decode_tokens_per_s


def test_ratios_are_above_one_where_the_engine_is_faster():
    engine = LatencyResult("float32", "float32", 11, ttft_s=[0.1], e2e_s=[1.1])
    baseline = LatencyResult("bfloat16", "bfloat16", 11, ttft_s=[0.3], e2e_s=[5.3])
    assert latency_ratios(engine, baseline) == pytest.approx({"ttft_speedup": 3.0, "decode_tokens_per_s": 5.0})


def test_decode_fraction_uses_the_bound_of_the_weights_a_step_reads():
    bounds = DecodeBounds(ROOFLINE, WEIGHTS)  # 8 GB/s over 1,000 parameters a token
    result = LatencyResult("bfloat16", "bfloat16", 11, ttft_s=[0.1], e2e_s=[0.1 + 10 / 1e6])  # 1e6 tok/s
    assert bounds.bound_tokens_per_s(result) == pytest.approx(4e6)
    assert bounds.fraction(result) == pytest.approx(0.25)
    # float32 compute reading bfloat16 weight copies (the CPU kernel): the bfloat16 bound applies
    upcast = LatencyResult("float32", "bfloat16", 11, ttft_s=[0.1], e2e_s=[0.1 + 10 / 1e6])
    assert bounds.bound_tokens_per_s(upcast) == pytest.approx(4e6)


def test_prompts_are_reproducible_distinct_and_of_the_asked_length():
    requests = latency_requests(list(range(3, 300)), input_len=32, output_len=4, count=3, seed=0)
    assert requests == latency_requests(list(range(3, 300)), input_len=32, output_len=4, count=3, seed=0)
    assert len({tuple(r.prompt_token_ids) for r in requests}) == 3  # no prefix-cache hit between runs
    assert {(len(r.prompt_token_ids), r.max_tokens) for r in requests} == {(32, 4)}


def test_input_lens_must_be_positive_integers(capsys):
    with pytest.raises(SystemExit):
        main(["latency", "--input-lens", "8,0"])
    assert "positive integers" in capsys.readouterr().err


# ---- the command ---------------------------------------------------------------------
@pytest.mark.cpu_isa
def test_latency_compares_engine_and_transformers(tiny_model, roofline_file, tmp_path, capsys, one_torch_thread):
    report_file = tmp_path / "latency.json"
    assert main(["latency", "--model", str(tiny_model), "--input-lens", "8,16,600", "--num-iters", "2", *TINY_RUN,
                 "--roofline", str(roofline_file), "--output-json", str(report_file)]) == 0
    report = json.loads(report_file.read_text())
    assert report["settings"]["engine"]["dtype"] == "bfloat16" and report["settings"]["output_len"] == 8
    assert set(report["input_lens"]) == {"8", "16"}  # 600 + 8 tokens do not fit in 512 positions
    bytes_per_s, per_token_params = 2e9, count_weights(tiny_model).per_token_params
    for sides in report["input_lens"].values():
        for side in ("autoglm", "transformers"):
            result = sides[side]
            assert SIDE_KEYS <= result.keys() and len(result["ttft_s"]) == len(result["e2e_s"]) == 2
            assert min(result["ttft_s"]) > 0 and min(result["e2e_s"]) > 0
            bound = bytes_per_s / (per_token_params * (4 if result["weight_dtype"] == "float32" else 2))
            assert result["decode_bound_tokens_per_s"] == pytest.approx(bound)
            assert result["decode_fraction_of_bound"] == pytest.approx(result["decode_tokens_per_s"] / bound)
        assert all(ttft < e2e for ttft, e2e in zip(sides["autoglm"]["ttft_s"], sides["autoglm"]["e2e_s"]))
        assert sides["transformers"]["compute_dtype"] == "bfloat16"
        ratios = sides["ratios"]
        assert ratios["ttft_speedup"] == pytest.approx(
            sides["transformers"]["mean_ttft_s"] / sides["autoglm"]["mean_ttft_s"])
        assert ratios["decode_tokens_per_s"] == pytest.approx(
            sides["autoglm"]["decode_tokens_per_s"] / sides["transformers"]["decode_tokens_per_s"])
    out = capsys.readouterr().out
    assert "skipping input length 600" in out and "ratio" in out and "of bound" in out


@pytest.mark.cpu_isa
def test_latency_without_baseline_runs_the_engine_alone(tiny_model, tmp_path, one_torch_thread):
    report_file = tmp_path / "latency.json"
    main(["latency", "--model", str(tiny_model), "--input-lens", "8", "--num-iters", "1", *TINY_RUN,
          "--baseline", "none", "--output-json", str(report_file)])
    sides = json.loads(report_file.read_text())["input_lens"]["8"]
    assert set(sides) == {"autoglm"}
    assert len(sides["autoglm"]["ttft_s"]) == 1 and "decode_fraction_of_bound" not in sides["autoglm"]
    assert sides["autoglm"]["profile"] is None


@pytest.mark.cpu_isa
def test_latency_profile_covers_the_timed_requests_only(tiny_model, tmp_path, capsys, one_torch_thread):
    report_file = tmp_path / "latency.json"
    main(["latency", "--model", str(tiny_model), "--input-lens", "8", "--num-iters", "2", *TINY_RUN,
          "--baseline", "none", "--profile", "--output-json", str(report_file)])
    engine = json.loads(report_file.read_text())["input_lens"]["8"]["autoglm"]
    profile = engine["profile"]
    assert profile["num_steps"] == 2 * engine["output_len"]  # a prefill step then one per further token, twice
    assert 0 < profile["phases_s"]["forward"] < profile["step_s"] <= sum(engine["e2e_s"])
    assert "where a step's time goes" in capsys.readouterr().out


def test_quantized_weights_are_bounded_by_their_integer_bytes_and_the_head_they_read():
    bounds = DecodeBounds(ROOFLINE, WEIGHTS)  # 8 GB/s; WEIGHTS spells out its matrices
    for head, expected_bytes in (("bfloat16", 1_400), ("int8", 1_100)):
        result = LatencyResult("bfloat16", "int8", 11, ttft_s=[0.1], e2e_s=[0.1 + 10 / 1e6],
                               lm_head_weight_dtype=head)
        assert bounds.bound_tokens_per_s(result) == pytest.approx(8e9 / expected_bytes)
    int4 = LatencyResult("bfloat16", "int4", 11, ttft_s=[0.1], e2e_s=[0.1 + 10 / 1e6], weight_group_size=32,
                         lm_head_weight_dtype="int4")
    assert bounds.fraction(int4) == pytest.approx(1e6 / (8e9 / 680))


@pytest.mark.cpu_isa
@pytest.mark.parametrize("head_flags", [[], ["--quantize-lm-head"]])
def test_latency_records_the_quantization_and_kv_cache_it_ran_with(tiny_model, roofline_file, tmp_path, capsys,
                                                                   one_torch_thread, head_flags):
    report_file = tmp_path / "latency.json"
    assert main(["latency", "--model", str(tiny_model), "--input-lens", "8", "--num-iters", "1", *TINY_RUN,
                 "--baseline", "none", "--quantization", "int8", "--kv-cache-dtype", "int8", *head_flags,
                 "--roofline", str(roofline_file), "--output-json", str(report_file)]) == 0
    report = json.loads(report_file.read_text())
    engine_settings = report["settings"]["engine"]
    assert (engine_settings["quantization"], engine_settings["kv_cache_dtype"]) == ("int8", "int8")
    engine = report["input_lens"]["8"]["autoglm"]
    head = "int8" if head_flags else engine["lm_head_weight_dtype"]
    assert (engine["weight_dtype"], engine["weight_group_size"], engine["lm_head_weight_dtype"]) == ("int8", None, head)
    assert head in ("int8", "bfloat16", "float32")
    weight_bytes = count_weights(tiny_model).bytes_per_token(WeightFormat("int8", None, head))
    assert engine["decode_bound_tokens_per_s"] == pytest.approx(2e9 / weight_bytes)
    assert f"int8, {head} head" in capsys.readouterr().out
