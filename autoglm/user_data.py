"""Where autoglm keeps the user's own data between runs (usage counts, the model registry) and what it can
rebuild (compiled kernels, downloaded checkpoints)."""
from __future__ import annotations

import os
from pathlib import Path


def user_data_dir() -> Path:
    """``$XDG_DATA_HOME/autoglm``, else ``~/.local/share/autoglm``."""
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "autoglm"


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/autoglm``, else ``~/.cache/autoglm``."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "autoglm"
