"""``NAME@VERSION``: how a response, a metric and a cache key name the exact version that served."""
from __future__ import annotations

VERSION_SEPARATOR = "@"


def version_id(name: str, version: str) -> str:
    """``NAME@VERSION``, the exact version a response names; just NAME on a server without a registry."""
    return f"{name}{VERSION_SEPARATOR}{version}" if version else name


def split_version_id(served: str) -> tuple[str, str]:
    """The model and the version of a version id; the version is empty for a bare NAME."""
    name, _, version = served.partition(VERSION_SEPARATOR)
    return name, version
