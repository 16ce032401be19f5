"""A checkpoint folder's weights as one SHA-256: what names a model's exact weights wherever they are copied.

The model registry records it for each version; the KV cache's disk tier keys its blocks by it, so that a block
computed by one model's weights is never read by another's.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_FILE_PATTERNS = ("*.safetensors", "*.bin")
_HASH_CHUNK_BYTES = 1 << 20


def weight_files(path: Path) -> list[Path]:
    """The folder's weight files, sorted by name, so the checksum does not depend on listing order."""
    files = {file for pattern in WEIGHT_FILE_PATTERNS for file in path.glob(pattern) if file.is_file()}
    return sorted(files, key=lambda file: file.name)


def weights_sha256(path: Path) -> str:
    """Hex SHA-256 over each weight file's name and bytes, in name order: changes if any file changes,
    is renamed, added or removed."""
    return files_sha256(weight_files(path))


def files_sha256(files: list[Path]) -> str:
    """Hex SHA-256 over each file's name and bytes, in the order given, read in chunks (a weight file may not
    fit in memory twice)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as stream:
            while chunk := stream.read(_HASH_CHUNK_BYTES):
                digest.update(chunk)
    return digest.hexdigest()
