"""What a registry records about a checkpoint folder: its weight files' SHA-256, size and architecture.

Every backend describes a checkpoint through here, so a version registered by one backend verifies the same way
under any other.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from autoglm.registry.errors import RegistryError
from autoglm.weights_checksum import WEIGHT_FILE_PATTERNS, files_sha256, weight_files, weights_sha256

# The checksum itself lives below the engine, which keys the KV disk tier by it; registries import it from here.
__all__ = ["CheckpointFacts", "checkpoint_architecture", "describe_checkpoint", "files_sha256", "weight_files",
           "weights_sha256"]


@dataclass(frozen=True)
class CheckpointFacts:
    """The registered facts about a checkpoint folder."""

    sha256: str
    architecture: str
    size_bytes: int


def checkpoint_architecture(path: Path) -> str:
    """config.json's ``architectures[0]``, else its ``model_type``."""
    config_file = path / "config.json"
    try:
        config = json.loads(config_file.read_text())
    except FileNotFoundError:
        raise RegistryError(f"{path} is not a checkpoint folder: it has no config.json") from None
    except json.JSONDecodeError as error:
        raise RegistryError(f"{config_file} is not valid JSON: {error}") from None
    architectures = config.get("architectures") or []
    architecture = architectures[0] if architectures else config.get("model_type")
    if not isinstance(architecture, str) or not architecture:
        raise RegistryError(f"{config_file} names no architecture: expected 'architectures' or 'model_type'")
    return architecture


def describe_checkpoint(path: Path) -> CheckpointFacts:
    """The facts to register for the checkpoint folder at ``path``; refuses a folder without weight files."""
    if not path.is_dir():
        raise RegistryError(f"checkpoint folder not found: {path}")
    files = weight_files(path)
    if not files:
        raise RegistryError(f"{path} holds no weight files (expected {' or '.join(WEIGHT_FILE_PATTERNS)})")
    return CheckpointFacts(sha256=weights_sha256(path), architecture=checkpoint_architecture(path),
                           size_bytes=sum(file.stat().st_size for file in files))
