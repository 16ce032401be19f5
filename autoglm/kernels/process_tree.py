"""A process's descendants, found and killed however they were started (Linux ``/proc`` and ``prctl``).

A build tool starts compilers in process groups of their own, so killing the build's group
misses them. A build child that is a subreaper instead adopts every orphan of its build, so
walking its descendants finds them all, and killing them until none is left ends the build.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS_S = 5.0  # a bound on re-killing: processes forked while the tree was walked appear on the next walk


def _prctl(option: int, value: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def become_subreaper(death_signal: signal.Signals) -> bool:
    """Adopt this process's orphaned descendants, and get ``death_signal`` when the parent ends; False where unsupported."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1) and _prctl(_PR_SET_PDEATHSIG, int(death_signal))


def _parents() -> dict[int, int]:
    """Each live (not zombie) process's parent pid."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # ended while listed
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid``, parents before their children."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        below = [child for parent in frontier for child in children.get(parent, [])]
        found.extend(below)
        frontier = below
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below ``pid``, walking again until none is left (or the bound passes). Orphans
    stay below ``pid`` only while it lives and is a subreaper (see ``become_subreaper``)."""
    deadline = time.monotonic() + KILL_ROUNDS_S
    while (found := descendants(pid)) and time.monotonic() < deadline:
        for descendant in found:
            try:
                os.kill(descendant, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)  # lets the killed exit before the next walk
