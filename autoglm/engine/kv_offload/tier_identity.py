"""What makes a block's K and V valid outside this engine, and the disk key made of it.

A block hash already covers the prefix's tokens, the tenant's salt, the images' and the adapter's hashes; the same
tokens give other K and V under other weights, dtypes, block sizes, or on another rank of a tensor- or
pipeline-parallel engine (other heads, other layers), so the key adds all of them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cached_property

import torch

from autoglm.config import EngineConfig
from autoglm.runner.kv_tiers.block_file import block_key

CHECKSUM_WORDS = 4  # a SHA-256 as the signed 64-bit words an engine hands its workers one at a time


@dataclass(frozen=True)
class TierIdentity:
    model_checksum: str  # SHA-256 of the weight files (autoglm.weights_checksum)
    quantization: str  # weights quantized at load compute other K and V
    dtype: str  # the compute dtype
    kv_cache_dtype: str
    block_size: int
    tensor_parallel_rank: int
    tensor_parallel_size: int
    pipeline_stage: int
    pipeline_parallel_size: int

    @cached_property
    def header(self) -> bytes:
        """The identity as a block file's header carries it: canonical JSON."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    def key(self, block_hash: bytes) -> bytes:
        """The block's disk key: the same on every engine of this identity, another on any other."""
        return block_key(self.header, block_hash)


def rank_identity(config: EngineConfig, dtype: torch.dtype, model_checksum: str, stage: int,
                  tensor_parallel_rank: int) -> TierIdentity:
    """The identity of the blocks that rank ``tensor_parallel_rank`` of pipeline stage ``stage`` computes."""
    parallel = config.parallel
    return TierIdentity(
        model_checksum=model_checksum,
        quantization=f"{config.model.quantization}:{config.model.quantization_group_size}",
        dtype=str(dtype).removeprefix("torch."), kv_cache_dtype=config.cache.kv_cache_dtype,
        block_size=config.cache.block_size, tensor_parallel_rank=tensor_parallel_rank,
        tensor_parallel_size=parallel.tensor_parallel_size, pipeline_stage=stage,
        pipeline_parallel_size=parallel.pipeline_parallel_size,
    )


def checksum_words(hex_digest: str) -> list[int]:
    """The engine's weights checksum as the words it shares with its workers, which need not hash the weights
    again."""
    raw = bytes.fromhex(hex_digest)
    return [int.from_bytes(raw[8 * word : 8 * (word + 1)], "little", signed=True) for word in range(CHECKSUM_WORDS)]


def checksum_from_words(words: list[int]) -> str:
    return b"".join(word.to_bytes(8, "little", signed=True) for word in words).hex()
