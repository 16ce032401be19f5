"""``kill_descendants`` walks the tree below the same process every round, killing what each walk finds."""
from __future__ import annotations

import signal

from autoglm.kernels import process_tree

ROOT = 1000


def test_every_walk_starts_from_the_root_until_one_finds_nothing(monkeypatch):
    """A second round finds what was forked while the first was killing (a compiler's shell starting another
    process); walking from anything but the root would miss it."""
    rounds = [[11, 12], [13], []]  # what each walk finds
    walks, killed = [], []

    def walk(pid: int) -> list[int]:
        walks.append(pid)
        return rounds.pop(0) if rounds else []

    monkeypatch.setattr(process_tree, "descendants", walk)
    monkeypatch.setattr(process_tree.os, "kill", lambda pid, sent: killed.append((pid, sent)))
    monkeypatch.setattr(process_tree.time, "sleep", lambda seconds: None)
    process_tree.kill_descendants(ROOT)
    assert walks == [ROOT, ROOT, ROOT]
    assert killed == [(11, signal.SIGKILL), (12, signal.SIGKILL), (13, signal.SIGKILL)]
