"""``autoglm bench lora`` end to end on the embedded model, and its arithmetic and table on a hand-made results file."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.lora_tables import lora
from autoglm.bench.lora import report
from autoglm.bench.results.results_files import ResultsFile

pytestmark = pytest.mark.timeout(300)


def test_a_run_times_the_base_model_and_each_number_of_adapters(tmp_path, one_torch_thread, capsys):
    out = tmp_path / "lora.json"
    assert main(["lora", "--ranks", "4", "--num-adapters", "1", "2", "--batch-size", "2", "--input-len", "4",
                 "--output-len", "2", "--rounds", "1", "--num-threads", "1", "--dtype", "float32",
                 "--output-json", str(out)]) == 0
    document = json.loads(out.read_text())
    kinds = [(entry["num_adapters"], entry["layer_by_layer"]) for entry in document["results"]]
    assert kinds[0] == (0, False) and kinds[-2:] == [(1, False), (2, False)]
    assert all(entry["output_tokens"] == 4 and len(entry["rounds_s"]) == 1 for entry in document["results"])
    assert "2 distinct adapters" in capsys.readouterr().out


def hand_made() -> dict:
    def entry(num_adapters, rounds_s, layer_by_layer=False):
        return {"rank": 8, "num_adapters": num_adapters, "layer_by_layer": layer_by_layer, "output_tokens": 100,
                "rounds_s": rounds_s}

    return {"settings": {"batch_size": 10, "input_len": 4, "output_len": 10, "rounds": 2},
            "machine": {"cpu_model": "AMD EPYC", "cpu_count": 2},
            "results": [entry(0, [2.0, 1.0]), entry(0, [1.25, 3.0], layer_by_layer=True), entry(4, [4.0, 2.5])]}


def test_each_kind_is_quoted_by_its_quickest_round_against_the_base_as_the_engine_runs_it():
    document = hand_made()
    assert report.tokens_per_s(document["results"][2]) == pytest.approx(40.0)
    assert report.ratio_at(document, "8", "4") == pytest.approx(0.4)
    assert report.ratio_to_base(document, document["results"][1]) == pytest.approx(0.8)


def test_the_table_names_every_kind_and_its_ratio():
    table = lora(ResultsFile("results/lora.json", hand_made()))
    assert "| rank 8 | 4 distinct adapters | 40.0 tok/s | **0.40x** |" in table
    assert "the base model alone, layer by layer" in table
