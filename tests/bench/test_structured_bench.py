"""``autoglm bench structured`` end to end on a narrow qwen2.5-0.5b, and its arithmetic on a hand-made results file."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.structured import report
from autoglm.errors import InvalidRequestError
from tests.bench.test_bench import make_narrow_model
from tests.optional_packages import needs_xgrammar

pytestmark = pytest.mark.timeout(300)


@needs_xgrammar
def test_a_run_measures_both_kinds_of_round_the_mask_and_the_compiles(tmp_path, one_torch_thread, capsys):
    make_narrow_model(tmp_path / "model")
    out = tmp_path / "structured.json"
    assert main(["structured", "--model", str(tmp_path / "model"), "--num-unconstrained", "2", "--num-neighbours",
                 "2", "--input-len", "4", "--output-len", "8", "--rounds", "1", "--num-threads", "1",
                 "--dtype", "float32", "--output-json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert [entry["constrained"] for entry in document["rounds"]] == [False, True]
    assert all(entry["full_steps"] >= 7 for entry in document["rounds"]), "every request decodes all its tokens"
    mask = document["mask_cost"]
    assert (mask["rows"], mask["constrained_rows"]) == (4, 2) and mask["steps"] >= 7
    assert mask["total_s"] == pytest.approx(mask["fill_s"] + mask["apply_s"])
    assert set(document["compile"]) == {"JSON schema", "regex"}
    assert document["machine"]["cpu_model"] is not None
    assert "unconstrained requests decode at" in capsys.readouterr().out


def test_a_round_larger_than_the_batch_is_refused(tmp_path):
    with pytest.raises(InvalidRequestError, match="--max-num-seqs is 4"):
        main(["structured", "--model", str(tmp_path), "--num-unconstrained", "3", "--num-neighbours", "2",
              "--max-num-seqs", "4"])


def test_the_ratio_and_added_time_come_from_the_quickest_round_of_each_kind():
    rounds = [{"constrained": False, "full_steps": 10, "full_steps_s": 1.0},
              {"constrained": True, "full_steps": 10, "full_steps_s": 1.25},
              {"constrained": False, "full_steps": 20, "full_steps_s": 2.2},
              {"constrained": True, "full_steps": 10, "full_steps_s": 1.1},
              {"constrained": False, "full_steps": 10, "full_steps_s": 5.0}]
    document = {"settings": {"num_unconstrained": 4}, "rounds": rounds}
    assert report.step_s(document, False) == pytest.approx(0.1)
    assert report.unconstrained_rate(document, True) == pytest.approx(4 / 0.11)
    assert report.rate_ratio(document) == pytest.approx(0.1 / 0.11)
    assert report.added_step_s(document) == pytest.approx(0.01)
