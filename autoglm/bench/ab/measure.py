"""An A/B comparison from start to results: both revisions checked out, then the benchmark run
on each in turn, A, B, A, B, so that whatever the machine does meanwhile hits both sides."""
from __future__ import annotations

import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoglm.bench.ab.checkouts import Checkout, resolve_revision, temporary_worktree, working_tree_revision
from autoglm.bench.ab.metrics import AFTER, BEFORE, SIDES
from autoglm.bench.ab.served_side import SERVE, revision_server, with_served_tokenizer
from autoglm.bench.ab.sides import engine_only_arguments, run_side
from autoglm.bench.results.report import machine_info

LABELS = {BEFORE: "A", AFTER: "B"}


@dataclass(frozen=True)
class ABSettings:
    repository: Path
    before: str
    after: str | None  # None: the working tree, uncommitted changes included
    rounds: int
    benchmark: list[str]  # e.g. ``["throughput", "--model", "/tmp/m"]``, without --output-json
    min_ratio: float
    server_args: str = ""  # ``-- serve`` only: the flags each revision's ``autoglm serve`` starts with


def _checkout(stack: ExitStack, settings: ABSettings, side: str, folder: Path) -> Checkout:
    name = settings.before if side == BEFORE else settings.after
    if name is None:
        return Checkout(working_tree_revision(settings.repository), settings.repository, extensions_dir=None)
    revision = resolve_revision(settings.repository, name)
    return stack.enter_context(temporary_worktree(settings.repository, revision, folder / side))


def _run_one(checkout: Checkout, arguments: list[str], server_args: str, output: Path, where: str) -> dict[str, Any]:
    """One side's results; ``serve`` runs against that side's own server, started for the run."""
    if arguments[0] != SERVE:
        return run_side(checkout, arguments, output, where)
    with revision_server(checkout, server_args, output.with_suffix(".server.log"), where) as base_url:
        return run_side(checkout, [*with_served_tokenizer(arguments, server_args), "--base-url", base_url], output,
                        where)


def _run_rounds(checkouts: dict[str, Checkout], arguments: dict[str, list[str]], settings: ABSettings,
                folder: Path) -> list[dict[str, Any]]:
    results = []
    for number in range(1, settings.rounds + 1):
        results.append({})
        for side in SIDES:
            where = f"round {number} of {settings.rounds}, {LABELS[side]} ({side})"
            print(f"[{where}] {checkouts[side].revision.describe()}: bench {' '.join(arguments[side])}", flush=True)
            output = folder / f"round-{number}-{side}.json"
            results[-1][side] = _run_one(checkouts[side], arguments[side], settings.server_args, output, where)
    return results


def measure_ab(settings: ABSettings) -> dict[str, Any]:
    """The results file's contents: both revisions, what ran, and every round's raw results.

    The temporary worktrees are gone when this returns or raises, Ctrl-C included.
    """
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="autoglm-ab-")))
        checkouts = {side: _checkout(stack, settings, side, folder) for side in SIDES}
        arguments = {side: engine_only_arguments(checkouts[side], settings.benchmark) for side in SIDES}
        rounds = _run_rounds(checkouts, arguments, settings, folder)
    return {
        "benchmark": settings.benchmark[0],
        "arguments": arguments,
        "server_args": settings.server_args,
        "min_ratio": settings.min_ratio,
        "revisions": {side: checkouts[side].revision.to_dict() for side in SIDES},
        "machine": machine_info(),
        "rounds": rounds,
    }
