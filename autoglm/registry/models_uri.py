"""MLflow's model URIs, ``models:/NAME/VERSION`` and ``models:/NAME@ALIAS``, as the MLflow registry reads them."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.registry.base import REFERENCE_SEPARATOR
from autoglm.registry.errors import RegistryError

MODELS_URI_SCHEME = "models:/"


@dataclass(frozen=True)
class ModelsUri:
    """A parsed model URI: exactly one of ``version`` and ``alias`` is set."""

    name: str
    version: str | None = None
    alias: str | None = None


def is_models_uri(reference: str) -> bool:
    return reference.startswith(MODELS_URI_SCHEME)


def parse_models_uri(uri: str) -> ModelsUri:
    """Split ``models:/NAME/VERSION`` or ``models:/NAME@ALIAS``; RegistryError naming both forms otherwise."""
    body = uri[len(MODELS_URI_SCHEME):] if is_models_uri(uri) else ""
    name, slash, version = body.partition("/")
    if slash:
        if name and version.isdigit():
            return ModelsUri(name=name, version=version)
    else:
        name, separator, alias = body.partition(REFERENCE_SEPARATOR)
        if name and separator and alias:
            return ModelsUri(name=name, alias=alias)
    raise RegistryError(
        f"model URI {uri!r} is malformed: expected {MODELS_URI_SCHEME}NAME/VERSION (a version number) or "
        f"{MODELS_URI_SCHEME}NAME{REFERENCE_SEPARATOR}ALIAS"
    )
