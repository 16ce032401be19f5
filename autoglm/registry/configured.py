"""The registry the settings name."""
from __future__ import annotations

from pathlib import Path

from autoglm.config.server import VersionsConfig
from autoglm.registry.base import Registry
from autoglm.registry.directory import DirectoryRegistry
from autoglm.user_data import user_data_dir


def default_registry_dir() -> Path:
    """``$XDG_DATA_HOME/autoglm/registry``, else ``~/.local/share/autoglm/registry``."""
    return user_data_dir() / "registry"


def registry_from_config(config: VersionsConfig) -> Registry:
    """The backend of the ``registry`` setting, at ``registry_dir`` (or its default folder)."""
    if config.registry == "mlflow":
        from autoglm.registry.mlflow_registry import MlflowRegistry  # the optional extra, imported only here
        return MlflowRegistry(config.mlflow_tracking_uri)
    root = Path(config.registry_dir).expanduser() if config.registry_dir else default_registry_dir()
    return DirectoryRegistry(root)
