"""One builder at a time per kernel build directory, and no lock outliving its builder.

The lock is an ``flock`` on a file beside the build: the operating system drops it when the
holding process ends, however it ends (a crash, SIGKILL, a lost parent), so a build killed
midway never leaves a lock that blocks the next start. The file names its holder's pid, which a
waiter reports; a file whose pid has ended is simply unlocked and taken over.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

POLL_S = 0.2
REPORT_EVERY_S = 30.0


class LockTimeout(TimeoutError):
    """Another live process held the build lock for longer than the caller would wait."""


@contextmanager
def build_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold the lock at ``path`` for the block, waiting at most ``timeout_s`` for a live holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, timeout_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the file releases the flock


def lock_holder(path: Path) -> int | None:
    """The pid written by the process that last took the lock, if any."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _acquire(fd: int, path: Path, timeout_s: float) -> None:
    start = time.monotonic()
    next_report = start
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if waited >= timeout_s:
            raise LockTimeout(
                f"process {lock_holder(path)} has held the kernel build lock {path} for over {timeout_s:.0f} s; "
                f"gave up waiting (stop that process, or raise the wait bound)"
            )
        if time.monotonic() >= next_report:
            logger.info("waiting for process %s, which is building into the same directory (lock %s; waited %.0f s"
                        " of at most %.0f s)", lock_holder(path), path, waited, timeout_s)
            next_report += REPORT_EVERY_S
        time.sleep(POLL_S)
