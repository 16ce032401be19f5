"""The two revisions an A/B comparison runs: each checked out into a temporary git worktree,
or the working tree itself, with the commit and subject the results file records."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoglm.bench.ab.errors import ABError

WORKING_TREE = "working tree"


@dataclass(frozen=True)
class Revision:
    name: str  # as asked, e.g. ``main~3``, or ``working tree``
    commit: str
    subject: str
    uncommitted_changes: bool = False  # only the working tree can differ from its commit

    def describe(self) -> str:
        changes = " + uncommitted changes" if self.uncommitted_changes else ""
        return f"{self.name} ({self.commit[:10]}{changes}: {self.subject})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Checkout:
    """A revision's files, and where its benchmark subprocesses build PyTorch extensions.

    ``extensions_dir`` is None for the working tree, which keeps the user's cache. It matters for
    revisions older than the engine's own kernel cache (keyed by the sources' contents, shared by
    every checkout): those built through PyTorch's, which is keyed by name and rebuilds whenever the
    sources move, so a temporary checkout sharing it would rebuild them on every alternation.
    """

    revision: Revision
    path: Path
    extensions_dir: Path | None


def git(repository: Path, *arguments: str) -> str:
    """A git command's output, or an :class:`ABError` with git's own message."""
    result = subprocess.run(["git", "-C", str(repository), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise ABError(f"git {' '.join(arguments)} failed in {repository}: {result.stderr.strip()}")
    return result.stdout.strip()


def repository_root(path: Path) -> Path:
    """The top of the git checkout holding ``path``."""
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except ABError:
        raise ABError(f"{path} is not inside a git checkout; pass --repo with one") from None


def resolve_revision(repository: Path, name: str) -> Revision:
    try:
        commit = git(repository, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    except ABError:
        raise ABError(f"{repository} has no commit {name!r}; give a branch, tag, hash or e.g. HEAD~1") from None
    return Revision(name, commit, git(repository, "log", "-1", "--format=%s", commit))


def working_tree_revision(repository: Path) -> Revision:
    head = resolve_revision(repository, "HEAD")
    changes = git(repository, "status", "--porcelain", "--untracked-files=no")
    return Revision(WORKING_TREE, head.commit, head.subject, uncommitted_changes=bool(changes))


@contextmanager
def temporary_worktree(repository: Path, revision: Revision, folder: Path) -> Iterator[Checkout]:
    """``revision`` checked out (detached) in ``folder``; the worktree is removed on any exit,
    Ctrl-C included."""
    try:
        git(repository, "worktree", "add", "--detach", "--quiet", str(folder), revision.commit)
        yield Checkout(revision, folder, extensions_dir=folder.with_name(folder.name + "-torch-extensions"))
    finally:
        # Each step may find nothing to do (an add that failed); neither hides the error in flight.
        subprocess.run(["git", "-C", str(repository), "worktree", "remove", "--force", str(folder)],
                       capture_output=True)
        subprocess.run(["git", "-C", str(repository), "worktree", "prune"], capture_output=True)
