"""``bench kv-accuracy``: its windows, its measurements against the auto cache, and the document it feeds."""
from __future__ import annotations

from pathlib import Path

import pytest

from autoglm.bench.cli import main as bench_main
from autoglm.bench.figures.command import main as figures_main
from autoglm.bench.kv_accuracy.measure import measure_kv_accuracy, results_document, window_starts
from autoglm.bench.kv_accuracy.report import summary_rows
from autoglm.config import AutoGLMConfig
from autoglm.corpus import read_corpus
from tests.tiny_models import make_tiny_checkpoint

QUANTIZATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "QUANTIZATION.md"


def test_windows_hold_the_positions_and_spread_over_the_text():
    assert window_starts(1000, 101, 250) == [0, 449, 898]  # 3 windows of 100 predictions each
    assert window_starts(101, 101, 100) == [0]
    with pytest.raises(ValueError, match="250 positions need 3 windows of 101 tokens; the text has only 300 tokens"):
        window_starts(300, 101, 250)


def test_each_kv_cache_dtype_is_compared_with_the_auto_cache(tmp_path):
    model_dir = make_tiny_checkpoint("llama", tmp_path)
    config = AutoGLMConfig(model=str(model_dir), dtype="float32", max_context_len=64)
    results = measure_kv_accuracy(config, ["int8", "fp8_e5m2"], read_corpus().held_out[:1500], num_positions=100)
    auto, int8, fp8 = results
    assert [result.kv_cache_dtype for result in results] == ["auto", "int8", "fp8_e5m2"]
    assert (auto.top1_agreement, auto.mean_kl_divergence) == (1.0, 0.0)
    assert 0 < int8.mean_kl_divergence < fp8.mean_kl_divergence < 0.1
    assert int8.top1_agreement > 0.9
    assert auto.kv_cache_bytes_per_token > int8.kv_cache_bytes_per_token > fp8.kv_cache_bytes_per_token
    assert abs(int8.loss_per_token - auto.loss_per_token) < 0.05


def test_quantized_weights_run_with_each_cache_against_float_weights_and_the_auto_cache(tmp_path):
    model_dir = make_tiny_checkpoint("llama", tmp_path)
    config = AutoGLMConfig(model=str(model_dir), dtype="float32", max_context_len=64, quantization="int8")
    results = measure_kv_accuracy(config, ["auto", "int8"], read_corpus().held_out[:1500], num_positions=100)
    reference, int8_weights, both = results
    assert [(result.quantization, result.kv_cache_dtype) for result in results] == [
        ("none", "auto"), ("int8", "auto"), ("int8", "int8")]
    assert (reference.top1_agreement, reference.mean_kl_divergence) == (1.0, 0.0)
    assert 0 < int8_weights.mean_kl_divergence < 0.1 and 0 < both.mean_kl_divergence < 0.1
    document = results_document(config, results, 100, 1500, {})
    assert list(document["kv_cache_dtypes"]) == ["auto", "int8 weights, auto", "int8 weights, int8"]
    assert [row[:2] for row in summary_rows(document)] == [["float32", "auto"], ["int8", "auto"], ["int8", "int8"]]


def test_the_quantization_document_matches_its_results_files(capsys):
    assert figures_main([str(QUANTIZATION_DOC), "--check"]) == 0, capsys.readouterr().out


def test_an_unknown_kv_cache_dtype_is_refused_naming_the_allowed_ones(capsys):
    with pytest.raises(SystemExit):
        bench_main(["kv-accuracy", "--kv-cache-dtypes", "auto,int4"])
    assert "from auto, int8, fp8_e4m3, fp8_e5m2; got 'auto,int4'" in capsys.readouterr().err
