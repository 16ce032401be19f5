"""What a compiled kernel library is made of, and the cache folder that holds its build.

The folder is named by a hash of everything the binary depends on: the sources, the flags,
the compiler, the Python ABI and the torch build. Checkouts and virtual environments with the
same torch therefore share one build, and an environment with another torch gets its own
folder instead of rebuilding (and invalidating) someone else's.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import torch

from autoglm.user_data import user_cache_dir

CACHE_ENV = "AUTOGLM_KERNEL_CACHE"
KEY_LENGTH = 16  # hex digits of the hash in folder names


@dataclass(frozen=True)
class KernelSpec:
    """A library built with ``torch.utils.cpp_extension``; ``headers`` are hashed, not compiled."""

    name: str
    sources: tuple[str, ...]
    headers: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "KernelSpec":
        return cls(**{key: value if isinstance(value, str) else tuple(value) for key, value in json.loads(text).items()})

    def key(self) -> str:
        """A hash of the sources' contents, the flags, the compiler and the Python and torch builds."""
        digest = hashlib.sha256()
        for part in (self.name, *self.cflags, "|", *self.ldflags, "|", *build_environment()):
            digest.update(part.encode() + b"\0")
        for path in (*self.sources, *self.headers):
            digest.update(Path(path).name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
        return digest.hexdigest()[:KEY_LENGTH]

    def build_dir(self, root: Path) -> Path:
        """Holds a finished build only: builds happen elsewhere and are renamed here when done."""
        return root / f"{self.name}-{self.key()}"

    def library(self, root: Path) -> Path:
        return self.build_dir(root) / f"{self.name}.so"

    def lock_path(self, root: Path) -> Path:
        return root / f"{self.build_dir(root).name}.lock"


def kernel_cache_root() -> Path:
    """``$AUTOGLM_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/autoglm/kernels``, else ``~/.cache/autoglm/kernels``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return user_cache_dir() / "kernels"


def compiler() -> str:
    """The C++ compiler PyTorch's extension builder runs."""
    return os.environ.get("CXX", "c++")


@lru_cache(maxsize=1)
def build_environment() -> tuple[str, ...]:
    """What a built library depends on beyond its sources: compiler, Python ABI and torch build."""
    try:
        compiler_version = subprocess.run([compiler(), "--version"], capture_output=True, text=True,
                                          timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        compiler_version = "no compiler"
    return (
        compiler(), compiler_version, sys.implementation.cache_tag, str(sysconfig.get_config_var("EXT_SUFFIX")),
        torch.__version__, str(torch.version.git_version), str(torch.compiled_with_cxx11_abi()),
    )
