"""``autoglm bench embed`` end to end on a tiny Qwen3, its table, and its arithmetic on a hand-made results file."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.embed import report
from autoglm.bench.figures.embed_tables import embed
from autoglm.bench.results.results_files import ResultsFolder
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.timeout(300)


def test_a_run_times_both_lengths_against_transformers_and_agrees_with_it(tmp_path, capsys):
    model = make_tiny_checkpoint("qwen3", tmp_path / "model")
    out = tmp_path / "embed.json"
    assert main(["embed", "--model", str(model), "--batch-size", "3", "--short-len", "4", "--long-len", "40",
                 "--rounds", "2", "--dtype", "float32", "--max-context-len", "64", "--kv-cache-memory", "1MiB",
                 "--output-json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert [entry["input_len"] for entry in document["lengths"]] == [4, 40]
    for entry in document["lengths"]:
        assert len(entry["engine_s"]) == len(entry["baseline_s"]) == 2
        assert entry["min_cosine"] > 0.99999
    assert document["model"]["layers"] == 2 and document["settings"]["engine"]["runner"] == "pooling"
    assert "tokens: the engine embeds" in capsys.readouterr().out
    table = embed(ResultsFolder(tmp_path).load("embed.json"))
    assert "| 3 inputs of 40 tokens |" in table


def test_a_generation_runner_is_refused(tmp_path):
    model = make_tiny_checkpoint("qwen3", tmp_path / "model")
    with pytest.raises(ValueError, match="runner 'pooling'"):
        main(["embed", "--model", str(model), "--runner", "generate", "--max-context-len", "64",
              "--kv-cache-memory", "1MiB", "--baseline", "none"])


def test_rates_come_from_the_quickest_round():
    document = {"settings": {"batch_size": 8}}
    entry = {"engine_s": [2.0, 1.0, 4.0], "baseline_s": [4.0, 3.0]}
    assert report.embeddings_per_s(document, entry, "engine_s") == pytest.approx(8.0)
    assert report.speedup(document, entry) == pytest.approx(3.0)
