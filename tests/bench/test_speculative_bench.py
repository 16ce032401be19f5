"""``autoglm bench speculative``: every side decodes the same prompts, and the table reads the results file."""
from __future__ import annotations

import json

from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from tests.tiny_models import make_tiny_checkpoint


def test_sides_decode_the_same_tokens_and_the_docs_table_renders(tmp_path, capsys):
    model = make_tiny_checkpoint("llama", tmp_path / "model")
    results = tmp_path / "speculative.json"
    assert main(["speculative", "--model", str(model), "--draft-model", str(model), "--dtype", "float32",
                 "--prompts", "2", "--passage-tokens", "24", "--cue-tokens", "4", "--output-len", "12",
                 "--num-speculative-tokens", "3", "--output-json", str(results)]) == 0
    printed = capsys.readouterr().out
    document = json.loads(results.read_text())
    sides = document["sides"]
    assert list(sides) == ["plain", "ngram", "draft_model"]
    assert all(side["identical_output"] for side in sides.values())
    assert sides["plain"]["acceptance_rate"] is None
    assert sides["draft_model"]["acceptance_rate"] == 1.0  # the draft is the model itself
    assert sides["draft_model"]["decode_tokens"] == 2 * 11
    rendered = render_document(f"<!-- figures:speculative {results.name} -->\n<!-- /figures -->\n", tmp_path)
    assert "| draft_model | 100% | " in rendered and "| plain | - | 1.00 |" in rendered
    assert printed.splitlines()[4].split()[:2] == ["draft_model", "100%"]
