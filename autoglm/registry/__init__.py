"""The model registry: named models, their versions and the aliases that point at them."""
from autoglm.registry.base import (
    CANARY_ALIAS,
    STABLE_ALIAS,
    ChecksumMismatchError,
    ModelVersion,
    Registry,
    RegistryError,
    base_checksum,
    verify_checksum,
)
from autoglm.registry.configured import registry_from_config
from autoglm.registry.directory import DirectoryRegistry

__all__ = [
    "CANARY_ALIAS", "STABLE_ALIAS", "ChecksumMismatchError", "DirectoryRegistry", "ModelVersion", "Registry",
    "RegistryError", "base_checksum", "registry_from_config", "verify_checksum",
]
