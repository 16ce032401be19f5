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

# What marks a folder as a PEFT adapter rather than a model checkpoint.
ADAPTER_CONFIG_FILE = "adapter_config.json"
# The checksum itself lives below the engine, which keys the KV disk tier by it; registries import it from here.
__all__ = ["ADAPTER_CONFIG_FILE", "CheckpointFacts", "adapter_sha256", "checkpoint_architecture", "describe_checkpoint",
           "files_sha256", "is_adapter_folder", "weight_files", "weights_sha256"]


@dataclass(frozen=True)
class CheckpointFacts:
    """The registered facts about a checkpoint folder."""

    sha256: str
    architecture: str
    size_bytes: int


def adapter_sha256(path: Path) -> str:
    """Hex SHA-256 of an adapter's config (its rank, alpha and target modules change what it writes) and weight
    files."""
    return files_sha256([path / ADAPTER_CONFIG_FILE, *weight_files(path)])


def is_adapter_folder(path: Path) -> bool:
    return (path / ADAPTER_CONFIG_FILE).is_file()


def checkpoint_architecture(path: Path) -> str:
    """config.json's ``architectures[0]``, else its ``model_type``; an adapter's is its PEFT type, as "LORA
    adapter"."""
    if is_adapter_folder(path):
        config = _json_file(path / ADAPTER_CONFIG_FILE)
        return f"{config.get('peft_type') or 'PEFT'} adapter"
    config_file = path / "config.json"
    if not config_file.is_file():
        raise RegistryError(f"{path} is not a checkpoint folder: it has no config.json (nor {ADAPTER_CONFIG_FILE})")
    config = _json_file(config_file)
    architectures = config.get("architectures") or []
    architecture = architectures[0] if architectures else config.get("model_type")
    if not isinstance(architecture, str) or not architecture:
        raise RegistryError(f"{config_file} names no architecture: expected 'architectures' or 'model_type'")
    return architecture


def _json_file(file: Path) -> dict:
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as error:
        raise RegistryError(f"{file} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise RegistryError(f"{file} is not a JSON object")
    return data


def describe_checkpoint(path: Path, base_sha256: str | None = None) -> CheckpointFacts:
    """The facts to register for the checkpoint folder at ``path``; refuses a folder without weight files, an
    adapter without the checksum of its base (`base_sha256`), and a base checksum for a model."""
    if not path.is_dir():
        raise RegistryError(f"checkpoint folder not found: {path}")
    adapter = is_adapter_folder(path)
    if adapter and base_sha256 is None:
        raise RegistryError(f"{path} is a LoRA adapter ({ADAPTER_CONFIG_FILE}); register it with the base model "
                            "version it runs on (--base NAME@VERSION), whose checksum it is pinned to")
    if not adapter and base_sha256 is not None:
        raise RegistryError(f"{path} is a model checkpoint, not a LoRA adapter (it has no {ADAPTER_CONFIG_FILE}); "
                            "only an adapter is registered with a base")
    files = weight_files(path)
    if not files:
        raise RegistryError(f"{path} holds no weight files (expected {' or '.join(WEIGHT_FILE_PATTERNS)})")
    return CheckpointFacts(sha256=weights_sha256(path), architecture=checkpoint_architecture(path),
                           size_bytes=sum(file.stat().st_size for file in files))
