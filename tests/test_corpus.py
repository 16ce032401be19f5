"""The shipped corpus and its one split, shared by the training script and ``eval-ppl --held-out``."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import autoglm
from autoglm import corpus
from autoglm.corpus import CORPUS_PATH, read_corpus, split_corpus

TRAINING_SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "train_default_model.py"


def test_split_keeps_every_character_once() -> None:
    split = split_corpus("abcdefghij", train_fraction=0.7)
    assert (split.train, split.held_out) == ("abcdefg", "hij")


def test_shipped_corpus_splits_as_the_model_card_says() -> None:
    split = read_corpus()
    assert (len(split.train), len(split.held_out)) == (1_003_854, 111_540)
    assert split.train.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")
    assert split.held_out.endswith("Whiles thou art waking.\n")


def test_corpus_is_package_data() -> None:
    package = Path(autoglm.__file__).parent
    assert CORPUS_PATH.is_relative_to(package)
    # pyproject.toml ships "assets/**/*" of the package.
    assert CORPUS_PATH in set(package.glob("assets/**/*"))


def test_training_script_reads_the_shipped_corpus_through_the_same_split(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("train_default_model", TRAINING_SCRIPT)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclasses look their module up
    spec.loader.exec_module(script)
    assert script.parse_args([]).corpus == CORPUS_PATH
    assert script.read_corpus is corpus.read_corpus
