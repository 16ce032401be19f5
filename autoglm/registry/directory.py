"""The default registry: a folder holding one JSON file per model, with its versions and aliases.

Checkpoints stay where they were registered from; a version records their absolute path and the SHA-256 of
their weight files. Each change rewrites the model's file in one step, under a lock file, so concurrent
``autoglm models`` commands never lose each other's changes and readers never see half a file.
"""
from __future__ import annotations

import fcntl
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from autoglm.atomic_write import write_text_atomically
from autoglm.registry.base import STABLE_ALIAS, ModelVersion, Registry, RegistryError, version_sort_key
from autoglm.registry.checkpoint import describe_checkpoint

MODEL_FILE_SUFFIX = ".json"
# Names, versions and aliases become file names and sit around '@' in references: no '/', '@' or leading dot.
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_IDENTIFIER_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass
class _ModelRecord:
    """What a model's file holds."""

    name: str
    versions: list[ModelVersion] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)

    def version_ids(self) -> list[str]:
        return [version.version for version in self.versions]

    def next_version(self) -> str:
        numbered = [int(version) for version in self.version_ids() if version.isdigit()]
        return str(max(numbered, default=0) + 1)

    def to_json(self) -> str:
        versions = [{**asdict(version), "path": str(version.path), "created": version.created.isoformat()}
                    for version in self.versions]
        return json.dumps({"name": self.name, "aliases": self.aliases, "versions": versions}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> _ModelRecord:
        data = json.loads(text)
        versions = [ModelVersion(**{**version, "path": Path(version["path"]),
                                    "created": datetime.fromisoformat(version["created"])})
                    for version in data["versions"]]
        return cls(name=data["name"], versions=versions, aliases=dict(data["aliases"]))


def check_identifier(kind: str, value: str) -> None:
    """Refuse a model name, version or alias that could not be a file name or part of a reference."""
    if not _IDENTIFIER.fullmatch(value):
        raise RegistryError(f"{kind} {value!r} is not allowed: expected {_IDENTIFIER_RULE}")


class DirectoryRegistry(Registry):
    """Models kept as ``<root>/<name>.json``; the folder is made on the first registration."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(file.name.removesuffix(MODEL_FILE_SUFFIX) for file in self.root.glob(f"*{MODEL_FILE_SUFFIX}")
                      if not file.name.startswith("."))

    def versions(self, name: str) -> list[ModelVersion]:
        return list(self._read(name).versions)

    def version(self, name: str, version: str) -> ModelVersion:
        record = self._read(name)
        for candidate in record.versions:
            if candidate.version == version:
                return candidate
        raise RegistryError(f"model {name!r} has no version {version!r}; versions: "
                            f"{', '.join(sorted(record.version_ids(), key=version_sort_key))}")

    def aliases(self, name: str) -> dict[str, str]:
        return dict(self._read(name).aliases)

    def set_alias(self, name: str, alias: str, version: str) -> None:
        check_identifier("alias", alias)
        if alias.isdigit():
            raise RegistryError(f"alias {alias!r} is not allowed: an alias of digits alone would hide the version "
                                "of that number")
        with self._modifying(name) as record:
            if version not in record.version_ids():
                raise RegistryError(f"cannot point alias {alias!r} of model {name!r} at version {version!r}: "
                                    f"versions: {', '.join(record.version_ids())}")
            record.aliases[alias] = version

    def remove_alias(self, name: str, alias: str) -> None:
        with self._modifying(name) as record:
            if alias not in record.aliases:
                raise RegistryError(f"model {name!r} has no alias {alias!r}; aliases: "
                                    f"{', '.join(sorted(record.aliases)) or 'none'}")
            del record.aliases[alias]

    def register(self, name: str, path: Path, version: str | None = None, notes: str = "",
                 eval_ppl: float | None = None, base_sha256: str | None = None) -> ModelVersion:
        """Record the checkpoint; the first version of a new model also becomes its ``stable``."""
        if version is not None:
            check_identifier("version", version)
        check_identifier("model name", name)
        path = path.expanduser().resolve()
        facts = describe_checkpoint(path, base_sha256)  # hashing takes a while: done before the lock is taken
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked(name):
            record = self._read(name) if self._file(name).exists() else _ModelRecord(name)
            if version in record.version_ids():
                raise RegistryError(f"model {name!r} already has version {version!r}; versions: "
                                    f"{', '.join(record.version_ids())} (omit --version to take the next number)")
            registered = ModelVersion(
                name=name, version=version or record.next_version(), path=path, sha256=facts.sha256,
                architecture=facts.architecture, size_bytes=facts.size_bytes,
                created=datetime.now(timezone.utc), notes=notes, eval_ppl=eval_ppl, base_sha256=base_sha256,
            )
            record.versions.append(registered)
            record.aliases.setdefault(STABLE_ALIAS, registered.version)
            self._write(record)
        return registered

    def _file(self, name: str) -> Path:
        check_identifier("model name", name)  # never a path outside the registry
        return self.root / f"{name}{MODEL_FILE_SUFFIX}"

    def _read(self, name: str) -> _ModelRecord:
        file = self._file(name)
        try:
            text = file.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            raise RegistryError(f"no model {name!r} in the registry {self.root}; models: "
                                f"{', '.join(self.names()) or 'none'}") from None
        try:
            return _ModelRecord.from_json(text)
        except (ValueError, KeyError, TypeError) as error:
            raise RegistryError(f"the registry file {file} is damaged ({error}); restore it or register the "
                                "model again") from None

    def _write(self, record: _ModelRecord) -> None:
        write_text_atomically(self._file(record.name), record.to_json())

    @contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """Hold the model's lock file for a read-modify-write; the system drops it if the process dies."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / f".{name}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    @contextmanager
    def _modifying(self, name: str) -> Iterator[_ModelRecord]:
        """The model's record, written back after the block unless it raised; a missing model is refused
        before any lock file is made."""
        self._read(name)
        with self._locked(name):
            record = self._read(name)
            yield record
            self._write(record)
