"""A worker's KV tiers: a host tier of its own heads or layers, sized by the engine, and its own block files in the
engine's disk folder."""
from __future__ import annotations

from pathlib import Path

from autoglm.config import EngineConfig
from autoglm.engine.kv_offload.tier_identity import CHECKSUM_WORDS, checksum_from_words, rank_identity
from autoglm.engine.pipeline_parallel.layout import RankLayout
from autoglm.engine.rank_model import RankModel
from autoglm.engine.tensor_parallel.process_group import GroupSettings
from autoglm.runner.kv_cache import KVPool
from autoglm.runner.kv_tiers.disk_store import DiskBlockStore, staging_folder_name
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.runner.kv_tiers.slot_disk import SlotDisk


def worker_host_tier(config: EngineConfig, settings: GroupSettings, rank: int, rank_model: RankModel, pool: KVPool,
                     num_slots: int, channel) -> HostBlockArea:
    """Rank ``rank``'s host tier of ``num_slots`` slots; with ``kv_disk_path``, the disk tier of its own block files
    too, reading what the engine stages (its process id and number, and the weights' checksum, from ``channel``)."""
    area = HostBlockArea(pool, num_slots)
    cache = config.cache
    if cache.kv_disk_path is not None:
        engine_pid, engine_number = channel.share(), channel.share()
        checksum = checksum_from_words([channel.share() for _ in range(CHECKSUM_WORDS)])
        layout = RankLayout.of(settings)
        identity = rank_identity(config, rank_model.dtype, checksum, layout.stage_of(rank), layout.tp_rank_of(rank))
        store = DiskBlockStore(Path(cache.kv_disk_path), cache.kv_disk_bytes, identity.header,
                               staging_folder_name(engine_pid, engine_number))
        area.disk = SlotDisk(store, area.slot_bytes)
    return area
