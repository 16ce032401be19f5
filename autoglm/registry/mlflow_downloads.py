"""Local copies of checkpoints kept in an MLflow registry: each version is downloaded once and checked against
the SHA-256 recorded when it was registered before it appears where the engine loads it from."""
from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from autoglm.registry.base import ModelVersion, verify_checksum
from autoglm.registry.errors import ChecksumMismatchError
from autoglm.user_data import user_cache_dir

_STORE_KEY_CHARS = 16
_CHECKSUM_KEY_CHARS = 16


def default_download_root() -> Path:
    """``$XDG_CACHE_HOME/autoglm/mlflow``, else ``~/.cache/autoglm/mlflow``."""
    return user_cache_dir() / "mlflow"


def download_folder(root: Path, tracking_uri: str, name: str, version: str, sha256: str) -> Path:
    """Where one version's checkpoint is kept: a folder per store, model, version and checksum, so a model
    deleted and registered again under the same version number never reuses the old files."""
    store_key = hashlib.sha256(tracking_uri.encode()).hexdigest()[:_STORE_KEY_CHARS]
    return root / store_key / quote(name, safe="") / f"{version}-{sha256[:_CHECKSUM_KEY_CHARS]}"


def ensure_downloaded(version: ModelVersion, download: Callable[[Path], Path]) -> None:
    """Fill ``version.path`` unless it is already there. ``download(staging)`` fetches the checkpoint under
    ``staging`` and returns its folder; that folder is verified, then renamed into place in one step, so an
    interrupted or corrupt download is never taken for a finished one. Processes racing on the same version
    each download, and the first rename wins."""
    if version.path.is_dir():
        return
    version.path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=version.path.parent, prefix=".download-") as staging:
        fetched = download(Path(staging))
        try:
            verify_checksum(replace(version, path=fetched))
        except ChecksumMismatchError as error:
            raise ChecksumMismatchError(
                f"{version.reference}: the checkpoint downloaded from MLflow is not the one registered ({error})"
            ) from None
        try:
            fetched.rename(version.path)
        except OSError:
            if not version.path.is_dir():
                raise
