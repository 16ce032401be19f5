"""A kernel library made available without making anyone wait for its build.

A library built before is imported at once. Otherwise a child process
(``autoglm.kernels.build_worker``) builds it while the caller carries on with its plain-PyTorch
path; a thread relays the child's messages to the log and imports the library when the child
succeeds. The child ends with every compiler of its build when this process exits, or is
killed, so no build outlives the start-up that asked for it.
"""
from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import autoglm
from autoglm.kernels.build_estimate import estimated_build_seconds
from autoglm.kernels.kernel_spec import KernelSpec
from autoglm.kernels.process_tree import kill_descendants

logger = logging.getLogger(__name__)

# How long a builder waits for another live process building the same folder before giving up.
LOCK_TIMEOUT_S = 900.0
TERMINATE_WAIT_S = 30.0  # a bound on the child killing its compilers before this process kills them and it


class BackgroundBuild:
    """One library: ``module`` is None until it is imported, and stays None if the build fails."""

    def __init__(self, spec: KernelSpec, root: Path, lock_timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self.spec = spec
        self.root = root
        self.lock_timeout_s = lock_timeout_s
        self.module: ModuleType | None = None
        self._done = threading.Event()
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Import the library if it was built before, else start building it in a child process."""
        library = self.spec.library(self.root)
        if library.exists():
            self.module = self._import(library)
            if self.module is not None:
                logger.info("loaded kernel library %s from %s", self.spec.name, library)
            self._done.set()
            return
        logger.info("building kernel library %s in the background (about %.0f s on this machine, once per torch "
                    "version) into %s", self.spec.name,
                    estimated_build_seconds(self.spec, self.root), self.spec.build_dir(self.root))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "autoglm.kernels.build_worker", self.spec.to_json(), str(self.root),
             "--lock-timeout-s", str(self.lock_timeout_s)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True, env=_child_environment(),
        )
        atexit.register(self.terminate)
        threading.Thread(target=self._follow, args=(time.monotonic(),), daemon=True,
                         name=f"build {self.spec.name}").start()

    def wait(self, timeout_s: float) -> ModuleType | None:
        """The library once the build has ended (None if it failed), or None after ``timeout_s``."""
        self._done.wait(timeout_s)
        return self.module

    @property
    def failed(self) -> bool:
        """The build has ended without a library (a later engine need not prepare for it)."""
        return self._done.is_set() and self.module is None

    @property
    def child_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def terminate(self) -> None:
        """Kill a running build with its compilers; the next start deletes what it left."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()  # the child kills every process of its build, then itself
            try:
                self._process.wait(TERMINATE_WAIT_S)
            except subprocess.TimeoutExpired:  # still a subreaper: every process of its build is below it
                kill_descendants(self._process.pid)
                self._process.kill()
                self._process.wait()

    def _follow(self, started: float) -> None:
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            logger.info("%s build: %s", self.spec.name, line.rstrip())
        status = self._process.wait()
        if status == 0:
            self.module = self._import(self.spec.library(self.root))
            if self.module is not None:
                logger.info("built kernel library %s in %.0f s", self.spec.name,
                            time.monotonic() - started)
        elif status > 0:  # a negative status is a kill, from terminate() or from outside
            logger.warning("building kernel library %s failed (exit status %d; its output is above); plain PyTorch "
                           "keeps running", self.spec.name, status)
        self._done.set()

    def _import(self, library: Path) -> ModuleType | None:
        try:
            spec = importlib.util.spec_from_file_location(self.spec.name, library)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (ImportError, OSError) as error:
            logger.warning("cannot load kernel library %s from %s, plain PyTorch runs instead (delete the folder to "
                           "rebuild them): %s", self.spec.name, library, error)
            return None
        return module


def _child_environment() -> dict[str, str]:
    """This environment, with the folder that holds ``autoglm`` first on the child's import path."""
    package_parent = str(Path(autoglm.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return env
