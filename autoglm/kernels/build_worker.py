"""The child process that compiles a kernel library: ``python -m autoglm.kernels.build_worker``.

It builds into a private folder under the build lock, then renames the folder into place, so a
finished build folder is always complete and a killed build leaves only a partial folder that
the next builder deletes. It ends itself and every compiler of its build (a subreaper, it adopts
them all; see ``process_tree``) on SIGTERM, or once its parent is gone: the parent holds the
write end of its stdin, which reads end-of-file however the parent ended, and the kernel sends
SIGHUP when the parent dies.

Python runs signal handlers on the main thread only, and the kernel may hand a signal to any
thread; a main thread blocked reading the build tool's output would run the handler only when the
tool next printed, which a stalled compile never does. So the build runs on a thread of its own
and the main thread only waits for it, waking often enough to run a handler promptly, and every
ending (a signal, end-of-file on stdin) is carried out there.
"""
from __future__ import annotations

import _thread
import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from autoglm.kernels.build_estimate import record_build_seconds
from autoglm.kernels.build_lock import LockTimeout, build_lock
from autoglm.kernels.kernel_spec import KernelSpec
from autoglm.kernels.process_tree import become_subreaper, kill_descendants
from autoglm.kernels.toolchain import put_ninja_on_path

PARTIAL_MARK = ".partial-"  # a folder being built: <build folder name>.partial-<pid>


def build(spec: KernelSpec, root: Path, lock_timeout_s: float) -> Path:
    """The built library of ``spec`` under ``root``: found there, or built now under the lock."""
    library = spec.library(root)
    if library.exists():
        return library
    with build_lock(spec.lock_path(root), lock_timeout_s):
        if library.exists():  # the holder we waited for built it
            return library
        final = spec.build_dir(root)
        for leftover in root.glob(f"{final.name}{PARTIAL_MARK}*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a build killed midway
        staging = root / f"{final.name}{PARTIAL_MARK}{os.getpid()}"
        staging.mkdir()
        started = time.monotonic()
        _compile(spec, staging)
        seconds = time.monotonic() - started
        shutil.rmtree(final, ignore_errors=True)  # an incomplete folder left by hand
        staging.rename(final)
        record_build_seconds(spec, root, seconds)
    return library


def _compile(spec: KernelSpec, folder: Path) -> None:
    from torch.utils.cpp_extension import load

    put_ninja_on_path()
    load(name=spec.name, sources=list(spec.sources), extra_cflags=list(spec.cflags),
         extra_ldflags=list(spec.ldflags), build_directory=str(folder))


SIGNAL_POLL_S = 0.2  # how soon the main thread runs a handler for a signal the kernel gave another thread


def _end_build() -> None:
    """Kill every process of this build, then this one (on the main thread: no other can return meanwhile)."""
    kill_descendants(os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


def _end_with_parent() -> None:
    """End the build on SIGTERM, at end-of-file on stdin, or at SIGHUP once the parent has gone."""
    parent = os.getppid()

    def on_hangup(signum: int, frame: object) -> None:
        if os.getppid() != parent:  # not the parent's thread that started this ending alone: the parent is gone
            _end_build()

    def watch() -> None:
        while os.read(sys.stdin.fileno(), 4096):  # unbuffered: a daemon thread must not hold Python's buffer lock
            pass
        _thread.interrupt_main(signal.SIGTERM)

    signal.signal(signal.SIGTERM, lambda signum, frame: _end_build())
    signal.signal(signal.SIGHUP, on_hangup)
    become_subreaper(signal.SIGHUP)
    threading.Thread(target=watch, daemon=True, name="watch parent").start()


def _build_on_a_thread(spec: KernelSpec, root: Path, lock_timeout_s: float) -> BaseException | None:
    """Run ``build`` on another thread while this one waits to run signal handlers; what it raised, if anything."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            build(spec, root, lock_timeout_s)
        except BaseException as error:  # handed to the main thread, which decides
            raised.append(error)

    builder = threading.Thread(target=run, daemon=True, name="build")
    builder.start()
    while builder.is_alive():
        builder.join(SIGNAL_POLL_S)
    return raised[0] if raised else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("spec", help="the KernelSpec as JSON")
    parser.add_argument("root", type=Path, help="the kernel cache folder")
    parser.add_argument("--lock-timeout-s", type=float, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)  # the parent relays it
    _end_with_parent()
    error = _build_on_a_thread(KernelSpec.from_json(args.spec), args.root, args.lock_timeout_s)
    if isinstance(error, (LockTimeout, OSError, RuntimeError, ImportError)):  # a live holder, no toolchain, a failed build
        print(error, file=sys.stderr)
        return 1
    if error is not None:
        raise error
    return 0


if __name__ == "__main__":
    sys.exit(main())
