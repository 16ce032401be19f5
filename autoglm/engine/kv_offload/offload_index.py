"""Which blocks the host tier's slots hold, least recently used first, and the moves each step carries.

A block the prefix cache evicts takes a host slot (a free one, else the least recently used one's, whose block
goes down to disk first); the runner copies it out before the step's forward pass overwrites the block. A lookup
that misses the pool finds a block in a slot, or reads its file from disk into one (checked there and then, so
that a bad file is a miss, never a restore), and the runner copies the slot into a fresh block, again before the
forward pass. A slot that a step's copies or an admission's lookup will read or write is pinned until that step's
plan is built: no other block takes it meanwhile.

The host tier is inclusive: a restored block keeps its slot, so evicting it again copies nothing.
"""
from __future__ import annotations

import time
from collections import OrderedDict

from autoglm.engine.kv_offload.tier_identity import TierIdentity
from autoglm.engine.kv_offload.tier_stats import TierStats
from autoglm.runner.kv_tiers.disk_store import DiskBlockStore
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.step_plan import KVTransfers


class KVOffload:
    """The engine's side of the tiers below the pool (see :class:`~autoglm.engine.sched.block_manager.LowerTiers`)."""

    def __init__(self, area: HostBlockArea, disk: DiskBlockStore | None, identity: TierIdentity) -> None:
        self.area = area
        self.disk = disk
        self.identity = identity
        self._slots: OrderedDict[bytes, int] = OrderedDict()  # block hash -> slot, least recently used first
        self._free_slots = list(range(area.num_slots - 1, -1, -1))
        self._pinned: set[int] = set()
        self._saves: list[tuple[int, int]] = []  # (block, slot)
        self._restores: list[tuple[int, int]] = []  # (slot, block)
        self._read_from_disk: set[bytes] = set()  # read into a slot by a lookup of this step: a disk hit if restored
        self.host_stats = TierStats("host")
        self.disk_stats = TierStats("disk")
        area.on_restore = self.host_stats.restore_latency.observe

    # ---- the block manager's lower tiers --------------------------------------------
    def holds(self, block_hash: bytes) -> bool:
        slot = self._slots.get(block_hash)
        if slot is None:
            slot = self._read_from_disk_into_slot(block_hash)
            if slot is None:
                return False
        self._slots.move_to_end(block_hash)
        self._pinned.add(slot)
        return True

    def evicted(self, block_id: int, block_hash: bytes) -> None:
        if block_hash in self._slots:
            self._slots.move_to_end(block_hash)
            return
        slot = self._claim_slot()
        if slot is None:
            return  # every slot is in use by this step's moves: the block is lost, as without tiers
        self._slots[block_hash] = slot
        self._pinned.add(slot)
        self._saves.append((block_id, slot))

    def restore(self, block_hashes: list[bytes], block_ids: list[int], missed_next: bool) -> None:
        for block_hash, block_id in zip(block_hashes, block_ids):
            self._restores.append((self._slots[block_hash], block_id))
            if block_hash in self._read_from_disk:
                self._read_from_disk.discard(block_hash)
                self.host_stats.misses += 1
                self.disk_stats.hits += 1
            else:
                self.host_stats.hits += 1
        if missed_next:
            self.host_stats.misses += 1
            if self.disk is not None:
                self.disk_stats.misses += 1

    # ---- the step --------------------------------------------------------------------
    def take_transfers(self) -> KVTransfers | None:
        """The moves the next plan carries, which unpins every slot; None when there are none."""
        saves, restores, self._saves, self._restores = self._saves, self._restores, [], []
        self._pinned.clear()
        self._read_from_disk.clear()
        if not saves and not restores:
            return None
        self.host_stats.bytes_written += len(saves) * self.area.slot_bytes
        self.host_stats.bytes_read += len(restores) * self.area.slot_bytes
        return KVTransfers(save_blocks=[block for block, _ in saves], save_slots=[slot for _, slot in saves],
                           restore_slots=[slot for slot, _ in restores],
                           restore_blocks=[block for _, block in restores])

    def persist(self) -> None:
        """Write every block the host tier holds down to disk, for the engines that start after this one closes."""
        self.area.synchronize()
        for block_hash, slot in self._slots.items():
            if slot not in self._pinned:  # a pinned slot may wait for a save no plan has carried yet
                self._write_to_disk(block_hash, slot)

    def stats(self) -> list[TierStats]:
        self.host_stats.bytes_stored = len(self._slots) * self.area.slot_bytes
        tiers = [self.host_stats.snapshot()]
        if self.disk is not None:
            disk = self.disk_stats
            disk.bytes_stored, disk.bytes_written, disk.bytes_read, disk.blocks_dropped = (
                self.disk.bytes_stored, self.disk.bytes_written, self.disk.bytes_read, self.disk.num_dropped)
            tiers.append(disk.snapshot())
        return tiers

    def check_invariants(self) -> None:
        """Raise AssertionError if a slot is lost, or held twice."""
        held = list(self._slots.values())
        assert len(set(held)) == len(held), "two blocks share a host slot"
        assert sorted(held + self._free_slots) == list(range(self.area.num_slots)), "a host slot is lost"

    # ---- slots -----------------------------------------------------------------------
    def _read_from_disk_into_slot(self, block_hash: bytes) -> int | None:
        """A slot now holding the block's checked file; None if the disk has no good file for it or no slot is free."""
        if self.disk is None:
            return None
        key = self.identity.key(block_hash)
        if not self.disk.contains(key):
            return None
        slot = self._claim_slot()
        if slot is None:
            return None
        started = time.perf_counter()
        payload = self.disk.read(key, self.area.slot_bytes)
        if payload is None:
            self._free_slots.append(slot)
            return None
        self.area.write_slot(slot, payload)
        self.disk_stats.restore_latency.observe(time.perf_counter() - started)
        self._slots[block_hash] = slot
        self._read_from_disk.add(block_hash)
        return slot

    def _claim_slot(self) -> int | None:
        """A slot to fill: a free one, else the least recently used unpinned one, its block written to disk first."""
        if self._free_slots:
            return self._free_slots.pop()
        for block_hash, slot in self._slots.items():
            if slot not in self._pinned:
                del self._slots[block_hash]
                self._write_to_disk(block_hash, slot)
                return slot
        return None

    def _write_to_disk(self, block_hash: bytes, slot: int) -> None:
        if self.disk is not None and self.disk.writable:
            self.disk.write(self.identity.key(block_hash), self.area.read_slot(slot))
