"""What makes a block's K and V valid outside this engine, and the disk key made of it.

A block hash already covers the prefix's tokens, the tenant's salt and the images' hashes; the same tokens give
other K and V under other weights, dtypes, block sizes or tensor-parallel shards, so the key adds all of them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property

from autoglm.runner.kv_tiers.block_file import KEY_BYTES


@dataclass(frozen=True)
class TierIdentity:
    model_checksum: str  # SHA-256 of the weight files (autoglm.weights_checksum)
    quantization: str  # weights quantized at load compute other K and V
    dtype: str  # the compute dtype
    kv_cache_dtype: str
    block_size: int
    tensor_parallel_rank: int
    tensor_parallel_size: int

    @cached_property
    def header(self) -> bytes:
        """The identity as a block file's header carries it: canonical JSON."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    def key(self, block_hash: bytes) -> bytes:
        """The block's disk key: the same on every engine of this identity, another on any other."""
        return hashlib.blake2b(self.header + block_hash, digest_size=KEY_BYTES, person=b"autoglm-kv-disk").digest()
