"""The model registry's interface: named models, their numbered versions and the aliases that point at them.

A backend stores versions and aliases (a directory of files, MLflow's model registry); resolving a reference
and verifying a checkpoint's checksum are the same for every backend and live here.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autoglm.registry.checkpoint import weights_sha256
from autoglm.registry.errors import ChecksumMismatchError, RegistryError

STABLE_ALIAS = "stable"
CANARY_ALIAS = "canary"
REFERENCE_SEPARATOR = "@"

__all__ = [
    "CANARY_ALIAS", "STABLE_ALIAS", "ChecksumMismatchError", "ModelVersion", "Registry", "RegistryError",
    "base_checksum", "verify_checksum", "version_sort_key",
]


@dataclass(frozen=True)
class ModelVersion:
    """One registered version of a model: where its checkpoint is and what it was when registered."""

    name: str
    version: str  # "1", "2", ... (the directory backend numbers them unless a version is given)
    path: Path  # the checkpoint folder the engine loads (for MLflow: the downloaded artifacts)
    sha256: str  # of the weight files (sorted *.safetensors / *.bin), hex
    architecture: str  # config.json's architectures[0] or model_type
    size_bytes: int  # of the weight files
    created: datetime
    notes: str = ""
    eval_ppl: float | None = None
    base_sha256: str | None = None  # a LoRA adapter's: the weights checksum of the base it runs on; None: a model

    @property
    def reference(self) -> str:
        """``NAME@VERSION``: the exact version id responses, metrics and cache keys carry."""
        return f"{self.name}{REFERENCE_SEPARATOR}{self.version}"


class Registry(ABC):
    """Named models, each with versions (oldest first) and aliases (alias -> version)."""

    @abstractmethod
    def names(self) -> list[str]:
        """The registered model names, sorted."""

    @abstractmethod
    def versions(self, name: str) -> list[ModelVersion]:
        """The model's versions, oldest first; RegistryError naming the registered models if it has none."""

    @abstractmethod
    def version(self, name: str, version: str) -> ModelVersion:
        """One version; RegistryError naming the model's versions (or the registered models) if absent."""

    @abstractmethod
    def aliases(self, name: str) -> dict[str, str]:
        """The model's aliases, alias -> version."""

    @abstractmethod
    def set_alias(self, name: str, alias: str, version: str) -> None:
        """Point ``alias`` at ``version``, moving it if it pointed elsewhere; the version must exist."""

    @abstractmethod
    def remove_alias(self, name: str, alias: str) -> None:
        """Drop ``alias``; RegistryError naming the model's aliases if it has no such alias."""

    @abstractmethod
    def register(self, name: str, path: Path, version: str | None = None, notes: str = "",
                 eval_ppl: float | None = None, base_sha256: str | None = None) -> ModelVersion:
        """Record the checkpoint at ``path`` as a new version of ``name`` (the next number unless given),
        with its weights' checksum, architecture and size; refuses a version that already exists. A LoRA
        adapter's folder needs `base_sha256`, the checksum of the base model version it is pinned to (see
        ``base_checksum``), and only an adapter's takes one."""

    def resolve(self, reference: str) -> ModelVersion:
        """The version ``reference`` names: ``NAME`` (its stable alias), ``NAME@ALIAS`` or ``NAME@VERSION``.
        After the ``@`` an alias is tried first, then a version."""
        name, separator, target = reference.partition(REFERENCE_SEPARATOR)
        if not name or (separator and not target):
            raise RegistryError(f"model reference {reference!r} is malformed: expected NAME, NAME@ALIAS or "
                                "NAME@VERSION")
        target = target or STABLE_ALIAS
        aliases = self.aliases(name)
        if target in aliases:
            return self.version(name, aliases[target])
        known = {version.version for version in self.versions(name)}
        if target in known:
            return self.version(name, target)
        raise RegistryError(
            f"model {name!r} has no alias or version {target!r}; aliases: "
            f"{', '.join(f'{alias}={version}' for alias, version in sorted(aliases.items())) or 'none'}; "
            f"versions: {', '.join(sorted(known, key=version_sort_key))}"
        )


def base_checksum(registry: Registry, base_reference: str) -> str:
    """The weights checksum an adapter registered on `base_reference` (NAME, NAME@ALIAS, NAME@VERSION) is pinned
    to; refuses a reference to another adapter."""
    base = registry.resolve(base_reference)
    if base.base_sha256 is not None:
        raise RegistryError(f"{base.reference} is itself a LoRA adapter; an adapter's base must be a model")
    return base.sha256


def version_sort_key(version: str) -> tuple[int, int | str]:
    """Numbered versions in numeric order, then named ones alphabetically."""
    return (0, int(version)) if version.isdigit() else (1, version)


def verify_checksum(version: ModelVersion) -> None:
    """Raise ChecksumMismatchError if the checkpoint's weight files are missing or differ from the ones
    registered."""
    if not version.path.is_dir():
        raise ChecksumMismatchError(f"{version.reference}: its checkpoint folder {version.path} is missing")
    actual = weights_sha256(version.path)
    if actual != version.sha256:
        raise ChecksumMismatchError(
            f"{version.reference}: the weight files in {version.path} changed since they were registered "
            f"(SHA-256 {actual[:12]}..., registered {version.sha256[:12]}...); register the checkpoint again "
            "as a new version"
        )
