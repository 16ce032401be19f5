"""The corpus the default model learned from, shipped beside it, and its one train/held-out split.

Tiny Shakespeare (public domain) is split on characters: the first 90% trained the tokenizer
and the model, the last 10% is held out. The training script and ``autoglm eval-ppl
--held-out`` both split it here, so the scores the model card quotes can be reproduced.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).parent / "assets" / "corpus" / "tinyshakespeare.txt"
TRAIN_FRACTION = 0.9


@dataclass(frozen=True)
class CorpusSplit:
    train: str
    held_out: str


def split_corpus(text: str, train_fraction: float = TRAIN_FRACTION) -> CorpusSplit:
    """The first `train_fraction` of the characters for training, the rest held out."""
    split_at = int(len(text) * train_fraction)
    return CorpusSplit(train=text[:split_at], held_out=text[split_at:])


def read_corpus(path: Path = CORPUS_PATH) -> CorpusSplit:
    return split_corpus(path.read_text(encoding="utf-8"))
