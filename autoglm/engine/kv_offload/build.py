"""The KV tiers an engine's settings ask for, checked against the engine they serve, and the log line naming them."""
from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path

from autoglm.config import EngineConfig
from autoglm.engine.kv_offload.offload_index import KVOffload
from autoglm.engine.kv_offload.tier_identity import checksum_words, rank_identity
from autoglm.engine.pipeline_parallel.layout import RankLayout
from autoglm.engine.setup import EngineParts
from autoglm.engine.tensor_parallel.parallel_runner import GroupRunner
from autoglm.runner.kv_cache import bytes_per_block
from autoglm.runner.kv_tiers.block_file import block_file_bytes
from autoglm.runner.kv_tiers.disk_store import DiskBlockStore, remove_stale_staging, staging_folder_name
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.runner.kv_tiers.slot_disk import SlotDisk
from autoglm.weights_checksum import weights_sha256

logger = logging.getLogger(__name__)

_engine_numbers = itertools.count()  # of the engines with a disk tier built in this process: their staging folders


def build_kv_offload(config: EngineConfig, parts: EngineParts) -> KVOffload | None:
    """The tiers below the pool, attached to the runner (and, under tensor or pipeline parallelism, to every
    worker's, each a host tier and block files of its own heads or layers); None when ``kv_offload_bytes`` is 0.
    A ValueError names a setting that cannot work with the others."""
    cache = config.cache
    if cache.kv_offload_bytes == 0:
        if cache.kv_disk_path is not None:
            raise ValueError("kv_disk_path needs kv_offload_bytes above 0: blocks reach the disk through the host tier")
        return None
    runner = parts.runner.runner if isinstance(parts.runner, GroupRunner) else parts.runner
    block_bytes = bytes_per_block(runner.model, cache.block_size, parts.dtype, runner.kv_pool.format)  # every rank's
    num_slots = cache.kv_offload_bytes // block_bytes
    parallel = config.parallel
    layout = RankLayout(parallel.pipeline_parallel_size, parallel.tensor_parallel_size)
    checksum = weights_sha256(parts.model_path) if cache.kv_disk_path is not None else ""
    identities = [rank_identity(config, parts.dtype, checksum, layout.stage_of(rank), layout.tp_rank_of(rank))
                  for rank in range(layout.world_size)]
    own_rank = layout.engine_rank
    file_bytes = block_file_bytes(identities[own_rank].header, block_bytes)
    refusal = _refusal(config, block_bytes, num_slots, file_bytes)
    if parts.workers is not None:
        parts.workers.share(0 if refusal else num_slots)  # the workers wait for it, refused or not
    if refusal is not None:
        raise ValueError(refusal)
    area = HostBlockArea(runner.kv_pool, num_slots)
    runner.host_tier = area
    disks = []
    if cache.kv_disk_path is not None:
        directory = Path(cache.kv_disk_path)
        engine_number = next(_engine_numbers)
        staging = staging_folder_name(os.getpid(), engine_number)
        if parts.workers is not None:  # each worker keeps its own files and reads those this engine stages
            for value in (os.getpid(), engine_number, *checksum_words(checksum)):
                parts.workers.share(value)
        disks = [DiskBlockStore(directory, cache.kv_disk_bytes, identity.header, staging) for identity in identities]
        remove_stale_staging(directory)
        area.disk = SlotDisk(disks[own_rank], area.slot_bytes)
        if parts.workers is not None:
            parts.workers.allow_for_stop_writes(area.num_bytes)  # each worker writes its host tier down as it stops
    logger.info("KV tiers: host memory of %d blocks (%.2f MiB, %s)%s", num_slots, area.num_bytes / 2**20,
                "a mapped file" if area.device.type == "cpu" else "pinned",
                "" if not disks else f", then disk at {disks[own_rank].directory} capped at "
                f"{cache.kv_disk_bytes / 2**20:.2f} MiB (model checksum {checksum[:12]})")
    return KVOffload(area, disks, identities[own_rank], own_rank)


def _refusal(config: EngineConfig, block_bytes: int, num_slots: int, file_bytes: int) -> str | None:
    """Why the tiers cannot run with these settings; None when they can."""
    cache, speculative = config.cache, config.speculative
    if not cache.enable_prefix_caching:
        return ("kv_offload_bytes keeps the prefix cache's evicted blocks, so it needs enable_prefix_caching (and "
                "use_paged_attention); turn them on or set kv_offload_bytes to 0")
    if speculative is not None and speculative.method != "ngram":
        return (f"speculative method {speculative.method!r} keeps KV of its own, which the tiers do not restore: "
                "with kv_offload_bytes use method 'ngram', or no speculative decoding")
    if num_slots < 1:
        return f"kv_offload_bytes of {cache.kv_offload_bytes} bytes holds no block; one block needs {block_bytes} bytes"
    if cache.kv_disk_path is not None and cache.kv_disk_bytes < file_bytes:
        return f"kv_disk_bytes of {cache.kv_disk_bytes} bytes holds no block file; one needs {file_bytes} bytes"
    return None
