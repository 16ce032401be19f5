"""``autoglm models register|list|show|alias``: the registry through the command line, its errors one line."""
from __future__ import annotations

import re

import pytest

import autoglm.perplexity
from autoglm.cli.main import main
from autoglm.corpus import read_corpus
from autoglm.perplexity import PerplexityResult
from autoglm.registry import DirectoryRegistry


@pytest.fixture
def models(tmp_path, capsys):
    """Runs ``autoglm models ...`` on a registry in tmp_path: (exit status, stdout, stderr)."""
    registry_dir = tmp_path / "registry"

    def run(*arguments: str) -> tuple[int, str, str]:
        status = main(["models", *arguments, "--registry-dir", str(registry_dir)])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    run.registry = DirectoryRegistry(registry_dir)
    return run


def test_register_twice_then_list_and_show(models, checkpoints):
    status, out, _ = models("register", "shakespeare", str(checkpoints[0]), "--notes", "first cut")
    assert status == 0
    assert re.match(r"registered shakespeare@1 \(stable\): LlamaForCausalLM, \d+\.\d\d MiB of weights, sha256 "
                    rf"[0-9a-f]{{12}}, from {re.escape(str(checkpoints[0].resolve()))}\n", out)
    assert models("register", "shakespeare", str(checkpoints[1]))[1].startswith("registered shakespeare@2: ")
    status, out, _ = models("list")
    assert status == 0 and out.splitlines()[1].split() == ["shakespeare", "2", "2", "stable=1"]
    status, out, _ = models("show", "shakespeare")
    first, second = models.registry.versions("shakespeare")
    assert status == 0
    assert "shakespeare@1  (stable)\n" in out and "shakespeare@2\n" in out
    assert f"sha256 {first.sha256}" in out and f"sha256 {second.sha256}" in out
    assert "notes:         first cut" in out and str(checkpoints[1].resolve()) in out


def test_register_takes_a_given_version(models, checkpoints):
    assert models("register", "m", str(checkpoints[0]), "--version", "2024-06")[0] == 0
    assert models.registry.resolve("m").version == "2024-06"


def test_register_with_eval_ppl_scores_the_held_out_corpus_and_keeps_the_perplexity(models, checkpoints,
                                                                                      monkeypatch):
    scored = []

    def score(llm, text, window=None, use_tqdm=False):
        scored.append((llm.config.model, text))
        return PerplexityResult(num_characters=len(text), num_tokens=11, num_scored_tokens=10, total_nll=20.0)

    monkeypatch.setattr(autoglm.perplexity, "evaluate_perplexity", score)
    status, out, _ = models("register", "m", str(checkpoints[0]), "--eval-ppl", "--quiet")
    assert status == 0 and out.rstrip().endswith("eval-ppl 7.389")
    assert scored == [(str(checkpoints[0]), read_corpus().held_out)]
    assert models.registry.resolve("m").eval_ppl == pytest.approx(7.389, abs=1e-3)
    assert "eval-ppl:      7.389 (held-out corpus)" in models("show", "m")[1]


def test_alias_points_moves_and_removes(models, checkpoints):
    models("register", "m", str(checkpoints[0]))
    models("register", "m", str(checkpoints[1]))
    status, out, _ = models("alias", "m", "canary", "2")
    assert status == 0 and out == "m@canary -> m@2\n"
    assert models.registry.aliases("m") == {"stable": "1", "canary": "2"}
    assert models("alias", "m", "canary", "--remove")[0] == 0
    assert models.registry.aliases("m") == {"stable": "1"}


@pytest.mark.parametrize(("arguments", "message"), [
    (("show", "absent"), "error: no model 'absent' in the registry .*; models: m\n"),
    (("alias", "m", "stable", "5"), r"error: cannot point alias 'stable' of model 'm' at version '5': versions: 1\n"),
    (("alias", "m", "stable"), r"error: give the VERSION the alias points at .*, or --remove\n"),
    (("alias", "m", "stable", "1", "--remove"), r"error: --remove takes no VERSION\b"),
    (("register", "m", "/nonexistent/checkpoint"), r"error: checkpoint folder not found: /nonexistent/checkpoint\n"),
    (("register", "m", "{checkpoint}", "--version", "1"), r"error: model 'm' already has version '1'"),
])
def test_errors_are_one_line_naming_what_exists(models, checkpoints, arguments, message):
    models("register", "m", str(checkpoints[0]))
    arguments = [argument.format(checkpoint=checkpoints[0]) for argument in arguments]
    status, out, err = models(*arguments)
    assert status == 2 and out == "" and err.count("\n") == 1 and re.match(message, err), err


def test_list_on_an_empty_registry_says_how_to_add_one(models):
    status, out, err = models("list")
    assert status == 0 and out == "" and "autoglm models register NAME PATH" in err


def test_the_registry_dir_setting_comes_from_the_environment(tmp_path, checkpoints, monkeypatch, capsys):
    monkeypatch.setenv("AUTOGLM_REGISTRY_DIR", str(tmp_path / "from-env"))
    assert main(["models", "register", "m", str(checkpoints[0])]) == 0
    assert DirectoryRegistry(tmp_path / "from-env").names() == ["m"]
