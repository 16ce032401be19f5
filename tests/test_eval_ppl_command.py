"""``autoglm eval-ppl``: its input is checked before any model loads, and --held-out scores the corpus split."""
from __future__ import annotations

from pathlib import Path

import pytest

import autoglm.perplexity
from autoglm.cli.main import main
from autoglm.corpus import read_corpus
from autoglm.perplexity import PerplexityResult
from tests.tiny_models import make_tiny_checkpoint

# A model folder that does not exist: a command that got as far as loading would complain about it.
NO_MODEL = "/nonexistent/model"


def eval_ppl_error(text_file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["eval-ppl", "--text", str(text_file), "--model", NO_MODEL]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and NO_MODEL not in error
    return error


def test_a_missing_file_is_named(tmp_path: Path, capsys) -> None:
    assert eval_ppl_error(tmp_path / "absent.txt", capsys) == f"error: --text: no such file: {tmp_path / 'absent.txt'}\n"


def test_an_empty_file_is_refused(tmp_path: Path, capsys) -> None:
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\n")
    assert eval_ppl_error(blank, capsys) == f"error: --text: {blank} is empty; give a file with text to score\n"


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path, capsys) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Roméo".encode("latin-1"))
    assert eval_ppl_error(latin1, capsys) == (
        f"error: --text: {latin1} is not UTF-8 text (byte 0xe9 at offset 3); convert it to UTF-8\n")


def test_a_folder_is_refused(tmp_path: Path, capsys) -> None:
    assert eval_ppl_error(tmp_path, capsys).startswith(f"error: --text: cannot read {tmp_path}")


def test_text_or_held_out_is_required(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["eval-ppl"])
    assert "one of the arguments --text --held-out is required" in capsys.readouterr().err


def test_held_out_scores_the_corpus_split_the_training_held_out(tmp_path: Path, monkeypatch, capsys) -> None:
    scored: list[str] = []

    def record(llm, text, window=None, use_tqdm=False):
        scored.append(text)
        return PerplexityResult(num_characters=len(text), num_tokens=10, num_scored_tokens=9, total_nll=9.0)

    monkeypatch.setattr(autoglm.perplexity, "evaluate_perplexity", record)
    model = make_tiny_checkpoint("llama", tmp_path / "llama")
    assert main(["eval-ppl", "--held-out", "--model", str(model), "--quiet"]) == 0
    assert scored == [read_corpus().held_out]
    assert capsys.readouterr().out.startswith(f"characters: {len(scored[0])}  tokens: 10  scored: 9\n")


def test_held_out_scores_with_the_kv_cache_dtype_given(tmp_path: Path, monkeypatch) -> None:
    engines = []

    def record(llm, text, window=None, use_tqdm=False):
        engines.append(llm.engine)
        return PerplexityResult(num_characters=len(text), num_tokens=10, num_scored_tokens=9, total_nll=9.0)

    monkeypatch.setattr(autoglm.perplexity, "evaluate_perplexity", record)
    model = make_tiny_checkpoint("llama", tmp_path / "llama")
    assert main(["eval-ppl", "--held-out", "--model", str(model), "--kv-cache-dtype", "int8", "--quiet"]) == 0
    assert engines[0].runner.kv_pool.format.name == "int8"
